import { setTimeout as delay } from 'node:timers/promises';
import t from 'tap';
import { IDEMPOTENCY_LEASE_MS } from '../../src/services/idempotency.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { buildTestApp } from '../helpers/app.js';
import { type CuttingProxy, startCuttingProxy } from '../helpers/cutting-proxy.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { postgresTestUrl, reachable, testSchema } from '../helpers/postgres.js';
import type { StoreAdapterUnderTest } from '../helpers/store.js';

/**
 * PostgreSQL away (its connections reset and new ones refused, through a loopback proxy) while
 * clients call the API: they are told 503 with Retry-After, never 500 and never anything of the
 * cause, and once it is back the same requests succeed, with nothing charged twice.
 */

const CREATE = '/api/v1/images/generations';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' }; // 25 tokens
const skip = (await reachable()) ? false : `no PostgreSQL at ${postgresTestUrl()}`;

/** The PostgreSQL adapter, connected through `proxy`. */
function throughProxy(proxy: () => Promise<CuttingProxy>): StoreAdapterUnderTest {
  return {
    kind: 'postgres',
    async open(t) {
      const { port } = await proxy();
      const { schema } = await testSchema(t);
      const url = new URL(postgresTestUrl());
      url.host = `127.0.0.1:${port}`;
      const openOne = async () => {
        const store = new PostgresStore({ connectionString: url.toString(), schema, poolSize: 5 });
        t.teardown(() => store.close());
        await store.migrate();
        return store;
      };
      return { store: await openOne(), reopen: openOne, env: {} };
    },
  };
}

t.test(
  "PostgreSQL away for 1.5 s: 503 with Retry-After; the retried create is served once its key's lease is over, charged once",
  { skip },
  async (t) => {
    const target = new URL(postgresTestUrl());
    const proxy = await startCuttingProxy(t, { host: target.hostname, port: Number(target.port || 5432) });
    const clock = { offset: 0 };
    const { app, store, newAccount } = await buildTestApp(
      t,
      {},
      { storeAdapter: throughProxy(async () => proxy), now: () => new Date(Date.now() + clock.offset) },
    );
    const { accountId, auth } = await newAccount(100);
    const headers = { ...auth, 'idempotency-key': 'outage-1' };
    // The key is known to the app (its cache) before the outage, as for a client already at work.
    t.equal((await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth })).statusCode, 200);

    proxy.cut(1500);
    const during = await Promise.all([
      app.inject({ method: 'POST', url: CREATE, headers, payload: BODY }),
      app.inject({ method: 'GET', url: '/api/v1/images/generations', headers: auth }),
      app.inject({ method: 'GET', url: '/api/v1/account/ledger', headers: auth }),
    ]);
    for (const response of during) {
      t.equal(response.statusCode, 503, `${response.json().code}: 503`);
      t.equal(response.headers['retry-after'], '5');
      t.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      t.equal(response.json().code, 'unavailable');
      t.notMatch(response.payload, /ECONN|Connection|pg|postgres|terminated/i, 'nothing of the cause');
    }

    await delay(1600);
    // The first attempt may have left its key in progress if its release was cut too: it answers 409
    // with Retry-After for at most the key's lease (docs/design.md §3.8), never a second task. Once the lease
    // has run out (the app's clock moved past it), the retry is served at once.
    clock.offset += IDEMPOTENCY_LEASE_MS + 1;
    const retried = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
    t.equal(retried.statusCode, 202, 'the same create succeeds once PostgreSQL is back');
    const tasks = await store.tasks.listTasks(accountId, { limit: 10 });
    t.equal(tasks.items.length, 1, 'one task');
    t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 0 }, 'one debit');
    await assertLedgerInvariant(t, store, accountId);
  },
);
