import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import t from 'tap';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { buildTestApp } from '../helpers/app.js';
import { nodeCommand } from '../helpers/processes.js';
import { testStoreAdapter } from '../helpers/store.js';

const cli = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const TASKS = 200;

function startWorkerProcess(dataDir: string): ChildProcess {
  return spawn(...nodeCommand(['--import', 'tsx', cli, 'worker']), {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      WORKER_CONCURRENCY: '2',
      WORKER_POLL_MS: '20',
      LOG_LEVEL: 'warn',
      SHUTDOWN_GRACE_MS: '10000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

t.test(`${TASKS} tasks with 2 worker processes on one SQLite file: all terminal, none processed twice`, async (t) => {
  const { app, store, dataDir, newAccount } = await buildTestApp(
    t,
    { RATE_LIMIT_CREATES_PER_MIN: '100000', MAX_ACTIVE_TASKS: '1000' },
    { storeAdapter: testStoreAdapter('sqlite') },
  );
  const { accountId, auth } = await newAccount(TASKS * 25);
  const workers = [startWorkerProcess(dataDir), startWorkerProcess(dataDir)];
  t.teardown(() => {
    for (const worker of workers) if (worker.exitCode === null) worker.kill('SIGKILL');
  });

  // Creates race the two workers' claims on the same file; none may surface SQLITE_BUSY.
  const statuses: number[] = [];
  for (let batch = 0; batch < TASKS / 20; batch++) {
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/images/generations',
          headers: auth,
          payload: { model: 'beta-v5-pro', prompt: `task ${batch * 20 + i}`, parameters: { aspect_ratio: '16:9' } },
        }),
      ),
    );
    statuses.push(...responses.map((r) => r.statusCode));
  }
  t.same([...new Set(statuses)], [202], 'every create was accepted');

  const db = new Database(`${dataDir}/imagegen.sqlite`, { readonly: true });
  t.teardown(() => db.close());
  const pending = () =>
    (db.prepare("SELECT count(*) AS n FROM tasks WHERE status IN ('CREATED', 'IN_PROGRESS')").get() as { n: number }).n;
  // Bounded wait for other processes: there is no event to await across processes.
  for (let waited = 0; pending() > 0 && waited < 180_000; waited += 100) await delay(100);
  t.equal(pending(), 0, 'every task reached a terminal state');

  for (const worker of workers) worker.kill('SIGTERM');
  const exits = await Promise.all(workers.map((w) => once(w, 'exit')));
  t.same(
    exits.map(([code]) => code),
    [0, 0],
    'both workers shut down cleanly on SIGTERM',
  );

  const byStatus = db.prepare('SELECT status, count(*) AS n FROM tasks GROUP BY status').all();
  t.same(byStatus, [{ status: 'COMPLETED', n: TASKS }]);
  const attempts = db.prepare('SELECT max(attempt) AS most, min(attempt) AS least FROM tasks').get();
  t.same(attempts, { most: 1, least: 1 }, 'every task was claimed exactly once');
  const results = db
    .prepare("SELECT count(*) AS media, count(DISTINCT task_id) AS tasks FROM media WHERE source = 'generated'")
    .get();
  t.same(results, { media: TASKS, tasks: TASKS }, 'one generated image per task, none twice');
  const totals = await store.accounts.ledgerTotals(accountId);
  t.same(totals, { grant: TASKS * 25, debit: TASKS * 25, refund: 0 });
  await assertLedgerInvariant(t, store, accountId);
});
