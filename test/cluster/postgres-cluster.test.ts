import { once } from 'node:events';
import pg from 'pg';
import t from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import type { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { testSchema, postgresTestUrl } from '../helpers/postgres.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

/**
 * Real processes of the CLI on one PostgreSQL schema: `migrate` started three times at once, and a
 * cluster of 2 `api` + 2 `worker` processes, one of them killed with SIGKILL mid-run.
 */

const TASKS = 200;

t.test(
  'migrate started by 3 processes at once on an empty schema: one schema, no error',
  await needsStore('postgres'),
  async (t) => {
    const { schema, url } = await testSchema(t);
    const admin = new pg.Client({ connectionString: postgresTestUrl() });
    await admin.connect();
    t.teardown(() => admin.end());
    await admin.query(`CREATE SCHEMA ${schema}`);

    const runs = [1, 2, 3].map(() =>
      startCli(t, ['migrate'], { DATABASE_URL: url, DATA_DIR: t.testdir({}), LOG_LEVEL: 'warn' }),
    );
    const results = await Promise.all(
      runs.map(async (run) => ({ code: (await once(run, 'exit'))[0], output: await run.output })),
    );
    for (const result of results) {
      t.equal(result.code, 0, result.output);
      t.match(result.output, /Database schema is up to date/);
    }
    const { rows } = await admin.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`);
    const versions = POSTGRES_MIGRATIONS.map((_, index) => index + 1);
    t.same(
      rows.map((r: { version: number }) => r.version),
      versions,
      'each migration recorded once',
    );
    const tables = await admin.query(
      'SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2',
      [schema, 'tasks'],
    );
    t.equal(tables.rows[0].n, 1, 'one tasks table');
  },
);

t.test(
  `${TASKS} tasks through 2 api and 2 worker processes on one PostgreSQL, one worker killed`,
  await needsStore('postgres'),
  async (t) => {
    const { schema, url, store } = await clusterDatabase(t, { poolSize: 4 });
    const { account, key } = await createAccountWithKey(store, {
      name: 'cluster',
      tokens: (TASKS + 1) * 25,
      now: new Date(),
    });

    const dataDir = t.testdir({});
    const shared = {
      DATABASE_URL: url,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      RATE_LIMIT_CREATES_PER_MIN: '100000',
      RATE_LIMIT_REQUESTS_PER_MIN: '100000',
      MAX_ACTIVE_TASKS: '1000',
      TASK_LEASE_MS: '2000',
      // Neither a worker's nor a long-poll's fallback re-read comes round during the test: work made by
      // another process reaches them only through LISTEN/NOTIFY (a lost lease needs the worker poll).
      WORKER_POLL_MS: '3000',
      LONG_POLL_FALLBACK_MS: '600000',
      SHUTDOWN_GRACE_MS: '10000',
    };
    const ports = [await freePort(), await freePort()];
    const apis = ports.map((port) => startCli(t, ['api'], { ...shared, PORT: String(port), HOST: '127.0.0.1' }));
    await Promise.all(apis.map((api) => api.printed('"msg":"ready"')));

    // The test hears the cluster's task changes as the processes do.
    let changed: () => void = () => {};
    await store.listen(() => changed());
    const terminalCount = async () => (await countByStatus(store, account.id)).terminal;

    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const create = async (i: number) => {
      const response = await fetch(`http://127.0.0.1:${ports[i % 2]}/api/v1/images/generations`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ model: 'alpha-pro', prompt: `cluster task ${i}` }),
      });
      t.equal(response.status, 202, `create ${i}`);
      return ((await response.json()) as { data: { task_id: string } }).data.task_id;
    };

    // Before any worker runs: a task created through one api process, long-polled on the other. Only
    // a worker process started afterwards can complete it.
    const probeId = await create(1);
    const probeStart = Date.now();
    const probe = fetch(`http://127.0.0.1:${ports[0]}/api/v1/images/generations/${probeId}?wait=60`, {
      headers: auth,
    }).then(async (response) => ({
      answeredAt: Date.now(),
      task: ((await response.json()) as { data: { status: string; completed_at: string } }).data,
    }));
    const workers = [1, 2].map(() => startCli(t, ['worker'], { ...shared, WORKER_CONCURRENCY: '2' }));
    await Promise.all(workers.map((w) => w.printed('"msg":"worker started"')));

    const taskIds: string[] = [];
    for (let batch = 0; batch < TASKS / 20; batch++) {
      taskIds.push(...(await Promise.all(Array.from({ length: 20 }, (_, i) => create(batch * 20 + i)))));
      if (batch === TASKS / 20 / 2 - 1) {
        // Mid-run: one worker dies without releasing what it holds.
        workers[0].kill('SIGKILL');
        await once(workers[0], 'exit');
      }
    }

    t.equal(workers[0].signalCode, 'SIGKILL', 'one worker was killed mid-run');

    const { answeredAt, task: probed } = await probe;
    t.equal(probed.status, 'COMPLETED', 'the long-poll was answered by the completion, not by its 60 s running out');
    t.ok(Date.parse(probed.completed_at) >= probeStart, 'completed by a worker after the long-poll was sent');
    t.ok(
      answeredAt - probeStart < 60_000,
      'answered before the wait ran out: woken by the signal (the fallback re-read is 10 min)',
    );
    t.comment(
      `long-poll answered ${answeredAt - Date.parse(probed.completed_at)} ms after the completion by another process`,
    );

    // Every task terminal: awaited through the same signals, with the surviving worker's 3 s poll as the backstop.
    const deadline = Date.now() + 240_000;
    while ((await terminalCount()) < TASKS + 1 && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        changed = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    const counts = await countByStatus(store, account.id);
    t.same(counts, { total: TASKS + 1, terminal: TASKS + 1, COMPLETED: TASKS + 1 }, 'every task completed');

    workers[1].kill('SIGTERM');
    for (const api of apis) api.kill('SIGTERM');
    const exits = await Promise.all([workers[1], ...apis].map((p) => once(p, 'exit')));
    t.same(
      exits.map(([code]) => code),
      [0, 0, 0],
      'the surviving processes shut down cleanly',
    );

    const admin = new pg.Client({ connectionString: postgresTestUrl(), options: `-c search_path=${schema}` });
    await admin.connect();
    t.teardown(() => admin.end());
    const twice = await admin.query(
      "SELECT task_id FROM media WHERE source = 'generated' GROUP BY task_id HAVING count(*) > 1",
    );
    t.same(twice.rows, [], 'no task has two results');
    const results = await admin.query("SELECT count(DISTINCT task_id)::int AS n FROM media WHERE source = 'generated'");
    t.equal(results.rows[0].n, TASKS + 1, 'one result per task');
    const totals = await store.accounts.ledgerTotals(account.id);
    t.same(
      totals,
      { grant: (TASKS + 1) * 25, debit: (TASKS + 1) * 25, refund: 0 },
      'charged once each, never refunded',
    );
    await assertLedgerInvariant(t, store, account.id);
    t.equal(new Set(taskIds).size, TASKS, 'every create made its own task');
  },
);

async function countByStatus(store: PostgresStore, accountId: string) {
  const counts: Record<string, number> = { total: 0, terminal: 0 };
  let cursor: string | undefined;
  do {
    const page = await store.tasks.listTasks(accountId, { limit: 1000, cursor });
    for (const task of page.items) {
      counts.total++;
      counts[task.status] = (counts[task.status] ?? 0) + 1;
      if (['COMPLETED', 'FAILED', 'CANCELED'].includes(task.status)) counts.terminal++;
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return counts;
}
