import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import type { TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { taskValues } from '../../src/store/sqlite/rows.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { insertAsOfSchema, openAtSchemaVersion } from '../helpers/sqlite-schema.js';
import { allPages, mixedTasks, MIX_START, newestFirst } from '../helpers/task-mix.js';

/**
 * The SQLite store keeps an account's tasks in one index ordered (account_id, model, status, id)
 * and builds each page by merging its (model, status) ranges newest first (migration 6). The
 * contract suite checks every filter and cursor; these check what is SQLite's own: a store made
 * before migration 6, and more page sizes than the store keeps statements for.
 */

const START = MIX_START;

async function storeWith(t: Test, tasksOf: (accountId: string) => TaskRecord[]) {
  const store = new SqliteStore(`${t.testdir({})}/store.sqlite`);
  await store.migrate();
  t.teardown(() => store.close());
  const now = new Date(START);
  const listed = await store.accounts.createAccount({
    id: newIdAt(now),
    name: 'listed',
    initialTokens: 1_000_000,
    now,
  });
  const other = await store.accounts.createAccount({ id: newIdAt(now), name: 'other', initialTokens: 1_000_000, now });
  const tasks = tasksOf(listed.id);
  // The other account's tasks are interleaved with the listed one's in every range of the index.
  for (const task of [...tasks, ...mixedTasks(other.id, 60, 7)])
    await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 1_000_000 });
  return { store, accountId: listed.id, tasks };
}

t.test('a store made before migration 6 lists the same tasks after it, from the one index', async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const old = openAtSchemaVersion(path, 5);
  const accountId = newIdAt(new Date(START));
  old
    .prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, ?)')
    .run(accountId, 'old', 0, START);
  const tasks = mixedTasks(accountId, 40, 11);
  insertAsOfSchema(old, 'tasks', tasks.map(taskValues));
  old.close();

  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  t.strictSame((await allPages(t, store, accountId, { limit: 15 })).flat(), newestFirst(tasks));
  t.strictSame(
    (await allPages(t, store, accountId, { limit: 15, status: 'CANCELED' })).flat(),
    newestFirst(tasks.filter((task) => task.status === 'CANCELED')),
  );

  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  const indexes = db
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL ORDER BY name",
    )
    .pluck()
    .all();
  // Lists read tasks_account_model_status alone (decision 0008), and so do an account's usage
  // reports; a key's spend is a row of key_spend, not an index of the tasks (decision 0038).
  t.strictSame(indexes, ['tasks_account_model_status', 'tasks_queue']);
});

t.test(
  'first pages of every size from 1 to 100 are right, more sizes than the store keeps statements for',
  async (t) => {
    const { store, accountId, tasks } = await storeWith(t, (id) => mixedTasks(id, 120, 9));
    const expected = newestFirst(tasks.filter((task) => task.status === 'COMPLETED'));
    for (let round = 0; round < 2; round++) {
      for (let limit = 1; limit <= 100; limit++) {
        const page = await store.tasks.listTasks(accountId, { limit, status: 'COMPLETED' });
        t.strictSame(
          page.items.map((task) => task.id),
          expected.slice(0, limit),
          `round ${round}, a page of ${limit}`,
        );
      }
    }
  },
);
