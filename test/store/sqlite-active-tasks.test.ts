import Database from 'better-sqlite3';
import t from 'tap';
import type { Test } from 'tap';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { taskValues } from '../../src/store/sqlite/rows.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { insertAsOfSchema, openAtSchemaVersion } from '../helpers/sqlite-schema.js';
import { claimNextTask } from '../helpers/store.js';

/**
 * The SQLite store keeps each account's number of CREATED + IN_PROGRESS tasks in
 * `accounts.active_tasks`, so that the MAX_ACTIVE_TASKS check is one row read. These walk a task
 * through every transition and check the count against the tasks themselves, and the cap against it.
 */

const CAP = { maxActiveTasks: 2 };
const CLAIM = { leaseMs: 60_000, maxAttempts: 3, deadlineMs: 3_600_000 };

function newTask(accountId: string, createdAt = new Date()): TaskRecord {
  return createTask({ model: 'alpha-pro', prompt: 'a lighthouse at dawn', parameters: {} } as never, {
    accountId,
    now: createdAt,
    newId: () => newIdAt(createdAt),
  });
}

async function open(t: Test, path = `${t.testdir({})}/store.sqlite`) {
  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  const counted = (accountId: string) => {
    const { kept } = db.prepare('SELECT active_tasks AS kept FROM accounts WHERE id = ?').get(accountId) as {
      kept: number;
    };
    const { real } = db
      .prepare("SELECT count(*) AS real FROM tasks WHERE account_id = ? AND status IN ('CREATED', 'IN_PROGRESS')")
      .get(accountId) as { real: number };
    return { kept, real };
  };
  return { store, counted, path };
}

t.test(
  'the count follows create, claim, requeue, complete, fail, cancel and the deadline, and the cap follows the count',
  async (t) => {
    const { store, counted } = await open(t);
    const now = new Date();
    const { id: accountId } = await store.accounts.createAccount({
      id: newIdAt(now),
      name: 'active',
      initialTokens: 10_000,
      now,
    });
    const expect = async (n: number, step: string) =>
      t.same(counted(accountId), { kept: n, real: n }, `${step}: ${n} active`);

    const [a, b] = [newTask(accountId), newTask(accountId)];
    await store.tasks.insertTaskWithDebit(a, CAP);
    await store.tasks.insertTaskWithDebit(b, CAP);
    await expect(2, 'two created');
    await t.rejects(
      store.tasks.insertTaskWithDebit(newTask(accountId), CAP),
      { code: 'too_many_active_tasks' },
      'the cap holds',
    );

    const claimed = await claimNextTask(store.tasks, { now: new Date(), ...CLAIM });
    t.equal(claimed?.id, a.id);
    await expect(2, 'one claimed');
    t.ok(await store.tasks.requeueTask({ taskId: a.id, attempt: 1, runAfter: new Date(), now: new Date() }));
    await expect(2, 'requeued');
    await t.rejects(
      store.tasks.insertTaskWithDebit(newTask(accountId), CAP),
      { code: 'too_many_active_tasks' },
      'still at the cap',
    );

    const again = await claimNextTask(store.tasks, { now: new Date(), ...CLAIM });
    t.ok(await store.tasks.completeTask({ taskId: again!.id, attempt: again!.attempt, media: [], now: new Date() }));
    await expect(1, 'one completed');
    t.notOk(
      await store.tasks.completeTask({ taskId: again!.id, attempt: again!.attempt, media: [], now: new Date() }),
      'a second completion is fenced out',
    );
    await expect(1, 'a fenced-out completion changes nothing');

    const c = newTask(accountId);
    await store.tasks.insertTaskWithDebit(c, CAP);
    await expect(2, 'room again after a completion');
    await store.tasks.cancelTask(accountId, c.id, new Date());
    await expect(1, 'a CREATED task canceled');
    await t.rejects(store.tasks.cancelTask(accountId, c.id, new Date()), { code: 'invalid_state' });
    await expect(1, 'a refused second cancel changes nothing');

    const running = await claimNextTask(store.tasks, { now: new Date(), ...CLAIM });
    t.equal(running?.id, b.id);
    t.ok(
      await store.tasks.failTask({
        taskId: b.id,
        attempt: running!.attempt,
        error: { code: 'x', message: 'x' },
        now: new Date(),
      }),
    );
    await expect(0, 'an IN_PROGRESS task failed');

    const stale = newTask(accountId, new Date(Date.now() - 2 * 3_600_000));
    await store.tasks.insertTaskWithDebit(stale, CAP);
    await expect(1, 'created');
    t.equal(
      await claimNextTask(store.tasks, { now: new Date(), ...CLAIM }),
      null,
      'past its deadline: failed, not claimed',
    );
    await expect(0, 'failed at its deadline');
    await assertLedgerInvariant(t, store, accountId);
  },
);

t.test('an existing database is counted when the column is added', async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  // The schema as it was before the column (migration 4), with tasks in every kind of state.
  const before = openAtSchemaVersion(path, 3);
  const now = new Date();
  const accountId = newIdAt(now);
  before
    .prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, ?)')
    .run(accountId, 'old', 1000, now.getTime());
  insertAsOfSchema(
    before,
    'tasks',
    (['CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED'] as const).map((status) =>
      taskValues({ ...newTask(accountId), status }),
    ),
  );
  before.close();

  const { store, counted } = await open(t, path);
  t.same(counted(accountId), { kept: 2, real: 2 }, 'CREATED and IN_PROGRESS are counted');
  await store.tasks.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 3 });
  await t.rejects(store.tasks.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 3 }), {
    code: 'too_many_active_tasks',
  });
});
