import { setTimeout as delay } from 'node:timers/promises';
import t from 'tap';
import { PostgresDatabase } from '../../src/store/postgres/postgres-database.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { CHANNEL_SQL } from '../../src/store/postgres/task-signals.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { postgresTestUrl, reachable, testSchema } from '../helpers/postgres.js';

/**
 * PostgreSQL connections reset under the service (a failover, a restarted PgBouncer, a cloud
 * maintenance), through a loopback proxy between the store and the real server: the operation
 * using a lost connection fails, the process goes on, and the pool and the LISTEN connection
 * replace what was lost.
 */

const skip = (await reachable()) ? false : `no PostgreSQL at ${postgresTestUrl()}`;

const proxiedUrl = (proxyPort: number) => {
  const url = new URL(postgresTestUrl());
  url.hostname = '127.0.0.1';
  url.port = String(proxyPort);
  return url.toString();
};
const target = () => {
  const url = new URL(postgresTestUrl());
  return { host: url.hostname, port: Number(url.port || 5432) };
};

t.test(
  'a connection reset between two statements of a transaction fails that transaction only',
  { skip },
  async (t) => {
    const proxy = await startCuttingProxy(t, target());
    const { schema } = await testSchema(t);
    const db = new PostgresDatabase({ connectionString: proxiedUrl(proxy.port), schema, poolSize: 2 });
    t.teardown(() => db.close());
    await db.migrate();

    await t.rejects(
      db.transaction(async (tx) => {
        await tx.query('SELECT 1');
        // The connection is checked out and idle here, as between two statements of a transaction.
        proxy.resetAll();
        await delay(100);
        await tx.query('SELECT 1');
      }),
      'the transaction that held the lost connection fails',
    );
    const { rows } = await db.query<{ one: number }>('SELECT 1 AS one');
    t.equal(rows[0].one, 1, 'the pool connects anew for the next statement');
    t.ok(await db.transaction(async (tx) => (await tx.query('SELECT 1')).rowCount === 1), 'and the next transaction');
  },
);

t.test('20 cuts of every connection under load: the process goes on, and so does the store', { skip }, async (t) => {
  const proxy = await startCuttingProxy(t, target());
  const { schema } = await testSchema(t);
  const store = new PostgresStore({ connectionString: proxiedUrl(proxy.port), schema, poolSize: 5 });
  t.teardown(() => store.close());
  await store.migrate();
  const signals: string[] = [];
  await store.listen((signal) => signals.push(signal.kind));
  const account = await store.accounts.createAccount({
    id: 'acct-cut',
    name: 'cut',
    initialTokens: 0,
    now: new Date(),
  });

  let stop = false;
  let ok = 0;
  let failed = 0;
  // Four clients granting tokens in a loop while the connections are cut under them.
  const load = Array.from({ length: 4 }, async () => {
    while (!stop) {
      try {
        await store.accounts.grantTokens({ accountId: account.id, amount: 1, note: null, now: new Date() });
        ok += 1;
      } catch {
        failed += 1;
        await delay(5);
      }
    }
  });
  for (let cut = 0; cut < 20; cut++) {
    await delay(40);
    proxy.cut(cut % 2 === 0 ? 0 : 30);
  }
  await delay(300);
  stop = true;
  await Promise.all(load);
  t.comment(`${ok} grants committed, ${failed} failed on a lost connection, ${proxy.connections} connections made`);
  t.ok(failed > 0, 'the cuts hit statements in flight');
  t.ok(ok > 0, 'work went on between the cuts');

  // A grant whose COMMIT reached the server but whose answer was cut is committed and reported
  // failed: the balance is between the two counts, and the ledger accounts for it exactly.
  const balance = (await store.accounts.getAccount(account.id))!.balance;
  t.ok(balance >= ok && balance <= ok + failed, `balance ${balance} within [${ok}, ${ok + failed}]`);
  await assertLedgerInvariant(t, store, account.id);

  // The LISTEN connection was cut too: it reconnects and hears signals again.
  const heard = signals.length;
  for (let i = 0; i < 50 && signals.length === heard; i++) {
    await store.sharedSecret('probe', () => 'x'); // any statement: the pool is back
    const db = (store as unknown as { database: PostgresDatabase }).database;
    await db.query(`SELECT pg_notify(${CHANNEL_SQL}, 'c')`);
    await delay(100);
  }
  t.ok(signals.length > heard, 'task signals arrive again after the LISTEN connection was lost');
});
