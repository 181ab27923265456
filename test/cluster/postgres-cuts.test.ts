import { setTimeout as delay } from 'node:timers/promises';
import t from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { postgresTestUrl, testSchema } from '../helpers/postgres.js';
import { freePort, startCli } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

/**
 * Decision 0019, what it must show: every PostgreSQL connection of an API-only `serve` and a `worker` reset 20
 * times under load (a loopback proxy between them and the server). Neither process exits, clients
 * get 202 or 503 (never 500), and afterwards every accepted task completes, charged once.
 */

t.test(
  '20 cuts of every PostgreSQL connection under load: serve and worker live on, no 500, every 202 completes',
  await needsStore('postgres'),
  async (t) => {
    const target = new URL(postgresTestUrl());
    const proxy = await startCuttingProxy(t, { host: target.hostname, port: Number(target.port || 5432) });
    const { schema, url } = await testSchema(t);
    const proxied = new URL(url);
    proxied.host = proxy.address;

    const direct = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
    t.teardown(() => direct.close());
    await direct.migrate();
    const { key, account } = await createAccountWithKey(direct, { name: 'cuts', tokens: 100_000, now: new Date() });

    const env = { DATABASE_URL: proxied.toString(), DATA_DIR: t.testdir({}), LONG_POLL_FALLBACK_MS: '200' };
    const port = await freePort();
    const api = startCli(t, ['serve'], { ...env, WORKER_CONCURRENCY: '0', PORT: String(port), HOST: '127.0.0.1' });
    const worker = startCli(t, ['worker'], { ...env, WORKER_CONCURRENCY: '2', WORKER_METRICS_PORT: '0' });
    await Promise.all([api.printed('"msg":"ready"'), worker.printed('"msg":"worker started"')]);
    const base = `http://127.0.0.1:${port}`;

    let loading = true;
    const accepted: string[] = [];
    const statuses = new Map<number, number>();
    const load = (async () => {
      for (let i = 0; loading; i++) {
        const response = await fetch(`${base}/api/v1/images/generations`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'idempotency-key': `cut-${i}`,
          },
          body: JSON.stringify({ model: 'alpha-pro', prompt: `cut ${i}` }),
        });
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        const body = (await response.json()) as { data?: { task_id: string } };
        if (response.status === 202) accepted.push(body.data!.task_id);
        await delay(50);
      }
    })();
    for (let cut = 0; cut < 20; cut++) {
      await delay(250);
      proxy.cut(cut % 4 === 3 ? 300 : 0);
    }
    await delay(500);
    loading = false;
    await load;

    t.equal(api.exitCode, null, 'serve is still running');
    t.equal(worker.exitCode, null, 'the worker is still running');
    t.comment(`answers during the cuts: ${JSON.stringify(Object.fromEntries(statuses))}`);
    t.notOk(statuses.has(500), 'no 500');
    t.ok(
      [...statuses.keys()].every((status) => status === 202 || status === 503),
      'only 202 or 503',
    );
    t.ok(accepted.length > 0, 'creates were accepted between the cuts');

    let unfinished = accepted.length;
    for (let i = 0; i < 600 && unfinished > 0; i++) {
      await delay(100);
      const tasks = await Promise.all(accepted.map((id) => direct.getTaskById(id)));
      unfinished = tasks.filter((task) => task?.status !== 'COMPLETED').length;
    }
    t.equal(unfinished, 0, `all ${accepted.length} accepted tasks completed`);
    const ready = await fetch(`${base}/readyz`);
    t.equal(ready.status, 200, 'ready again');
    await assertLedgerInvariant(t, direct, account.id);
  },
);
