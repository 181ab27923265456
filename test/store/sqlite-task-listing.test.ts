import Database from 'better-sqlite3';
import t, { type Test } from 'tap';
import { TASK_STATUSES } from '../../schemas/resources.js';
import { createTask, type TaskRecord, type TaskStatus } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import type { TaskListQuery } from '../../src/store/port.js';
import { fromTask } from '../../src/store/sqlite/rows.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';

/**
 * The SQLite store keeps an account's tasks in one index ordered (account_id, model, status, id)
 * and builds each page by merging its (model, status) ranges newest first (migration 6). The
 * contract suite checks every filter and cursor; these check what is SQLite's own: a store made
 * before migration 6, and more page sizes than the store keeps statements for.
 */

/** A model the catalog does not offer (any more): its tasks must still be listed. */
const RETIRED_MODEL = 'gamma-retired';
const MODELS = ['alpha-pro', 'beta-v5-pro', RETIRED_MODEL];
const START = Date.parse('2026-03-01T00:00:00Z');

/** Tasks of every model and status, three in each millisecond used, in a fixed pseudo-random mix. */
function mixedTasks(accountId: string, count: number, seed: number): TaskRecord[] {
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  const tasks: TaskRecord[] = [];
  for (let i = 0; i < count; i++) {
    // In creation order, as ids are made: a UUIDv7 generator never goes back to an earlier millisecond.
    const at = new Date(START + Math.floor(i / 3) * 1000);
    const task = createTask({ model: 'alpha-pro', prompt: `task ${i}` }, { accountId, now: at, newId: () => newIdAt(at) });
    const status = TASK_STATUSES[next(TASK_STATUSES.length)] as TaskStatus;
    const finished = status === 'CREATED' ? {} : { startedAt: at, completedAt: status === 'IN_PROGRESS' ? null : at };
    tasks.push({ ...task, model: MODELS[next(MODELS.length)], status, ...finished });
  }
  return tasks;
}

async function storeWith(t: Test, tasksOf: (accountId: string) => TaskRecord[]) {
  const store = new SqliteStore(`${t.testdir({})}/store.sqlite`);
  await store.migrate();
  t.teardown(() => store.close());
  const now = new Date(START);
  const listed = await store.createAccount({ id: newIdAt(now), name: 'listed', initialTokens: 1_000_000, now });
  const other = await store.createAccount({ id: newIdAt(now), name: 'other', initialTokens: 1_000_000, now });
  const tasks = tasksOf(listed.id);
  // The other account's tasks are interleaved with the listed one's in every range of the index.
  for (const task of [...tasks, ...mixedTasks(other.id, 60, 7)]) await store.insertTaskWithDebit(task, { maxActiveTasks: 1_000_000 });
  return { store, accountId: listed.id, tasks };
}

/** Every page of a list, followed by its cursor. */
async function allPages(t: Test, store: SqliteStore, accountId: string, query: Omit<TaskListQuery, 'cursor'>) {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await store.listTasks(accountId, { ...query, cursor });
    t.ok(page.items.length <= query.limit);
    pages.push(page.items.map((task) => task.id));
    cursor = page.nextCursor ?? undefined;
  } while (cursor && pages.length < 1000);
  return pages;
}

const newestFirst = (tasks: TaskRecord[]) => tasks.map((task) => task.id).sort().reverse();

t.test('a store made before migration 6 lists the same tasks after it, from the one index', async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const old = openAtSchemaVersion(path, 5);
  const accountId = newIdAt(new Date(START));
  old.prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, ?)').run(accountId, 'old', 0, START);
  const tasks = mixedTasks(accountId, 40, 11);
  const insert = old.prepare(`INSERT INTO tasks (${Object.keys(fromTask(tasks[0])).join(', ')}) VALUES (${Object.keys(fromTask(tasks[0])).map((c) => `@${c}`).join(', ')})`);
  for (const task of tasks) insert.run(fromTask(task));
  old.close();

  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  t.strictSame((await allPages(t, store, accountId, { limit: 15 })).flat(), newestFirst(tasks));
  t.strictSame((await allPages(t, store, accountId, { limit: 15, status: 'CANCELED' })).flat(), newestFirst(tasks.filter((task) => task.status === 'CANCELED')));

  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL ORDER BY name").pluck().all();
  t.strictSame(indexes, ['tasks_account_model_status', 'tasks_queue']);
});

t.test('first pages of every size from 1 to 100 are right, more sizes than the store keeps statements for', async (t) => {
  const { store, accountId, tasks } = await storeWith(t, (id) => mixedTasks(id, 120, 9));
  const expected = newestFirst(tasks.filter((task) => task.status === 'COMPLETED'));
  for (let round = 0; round < 2; round++) {
    for (let limit = 1; limit <= 100; limit++) {
      const page = await store.listTasks(accountId, { limit, status: 'COMPLETED' });
      t.strictSame(page.items.map((task) => task.id), expected.slice(0, limit), `round ${round}, a page of ${limit}`);
    }
  }
});
