import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import t from 'tap';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { freePort, spawnTsChild, waitForOutput } from '../helpers/processes.js';
import { testStoreAdapter } from '../helpers/store.js';

/**
 * Group commit answers a batch of creates after one COMMIT. This kills the API process with SIGKILL
 * while creates are in flight (batches queued, in a transaction, being answered) and checks, on the
 * file it left: every create that was answered 202 is there and was charged once, its
 * Idempotency-Key completed with that response; nothing was charged without a task. SQLite's
 * own: the group commit is the embedded store's; PostgreSQL commits each create on its own.
 */
const cli = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const CONNECTIONS = 40;
const KILL_AFTER_ACCEPTED = 300;

t.test(
  'the API killed with SIGKILL under create load: every 202 is stored and paid once, nothing else is',
  async (t) => {
    const dataDir = t.testdir({});
    const port = await freePort();
    const child = spawnTsChild(t, cli, ['serve'], {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '0',
      DEV_ACCOUNT_TOKENS: '1000000',
      MAX_ACTIVE_TASKS: '100000',
      RATE_LIMIT_CREATES_PER_MIN: '1000000',
    });
    const key = /(igk_[A-Za-z0-9_-]{43})/.exec(await waitForOutput(child, 'API docs:'))![1];
    const base = `http://127.0.0.1:${port}`;
    for (
      let i = 0;
      i < 100 &&
      !(await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      ));
      i++
    )
      await new Promise((r) => setTimeout(r, 100));

    const accepted: { taskId: string; idempotencyKey: string | null }[] = [];
    let sent = 0;
    const exited = once(child, 'exit');
    const client = async (connection: number) => {
      for (let n = 0; ; n++) {
        // Every other create carries an Idempotency-Key, so both paths are in the batches.
        const idempotencyKey = n % 2 ? `crash-${connection}-${n}` : null;
        sent++;
        const response = await fetch(`${base}/api/v1/images/generations`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
          },
          body: JSON.stringify({ model: 'alpha-pro', prompt: `crash test ${connection}/${n}` }),
        }).catch(() => null);
        if (!response) return; // the process is gone
        const body = (await response.json().catch(() => null)) as { data?: { task_id: string } } | null;
        if (response.status !== 202 || !body?.data) return;
        accepted.push({ taskId: body.data.task_id, idempotencyKey });
        if (accepted.length === KILL_AFTER_ACCEPTED) child.kill('SIGKILL');
      }
    };
    await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => client(i)));
    await exited;
    t.ok(
      accepted.length >= KILL_AFTER_ACCEPTED,
      `${accepted.length} of ${sent} creates were answered 202 before the kill`,
    );

    const { store } = await testStoreAdapter('sqlite').open(t, { dataDir });
    const db = new Database(`${dataDir}/imagegen.sqlite`, { readonly: true });
    t.teardown(() => db.close());
    const { accountId, tasks } = db
      .prepare('SELECT account_id AS accountId, count(*) AS tasks FROM tasks GROUP BY account_id')
      .get() as { accountId: string; tasks: number };

    const stored = new Set((db.prepare('SELECT id FROM tasks').all() as { id: string }[]).map((r) => r.id));
    t.equal(accepted.filter((a) => !stored.has(a.taskId)).length, 0, 'every task answered 202 is stored');
    t.ok(tasks <= sent, 'no task that was never asked for');
    const debits = db
      .prepare("SELECT task_id, count(*) AS n FROM ledger WHERE kind = 'debit' GROUP BY task_id")
      .all() as { task_id: string; n: number }[];
    t.equal(debits.length, tasks, 'one debit per stored task, and no debit without a task');
    t.ok(
      debits.every((d) => d.n === 1 && stored.has(d.task_id)),
      'each charged exactly once',
    );

    const keyRow = db.prepare('SELECT status, response_body FROM idempotency_keys WHERE key = ?');
    const withKey = accepted.filter((a) => a.idempotencyKey);
    const completed = withKey.filter((a) => {
      const row = keyRow.get(a.idempotencyKey) as { status: string; response_body: Buffer } | undefined;
      return row?.status === 'completed' && row.response_body.toString().includes(a.taskId);
    });
    t.equal(completed.length, withKey.length, 'every Idempotency-Key answered 202 is completed with that response');
    await assertLedgerInvariant(t, store, accountId);
  },
);
