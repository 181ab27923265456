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
 * and builds each page by merging its (model, status) ranges newest first (migration 6). These
 * check that merge against the plain answer: every task of the account that matches, newest
 * first, each exactly once across the pages.
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

t.test('every filter pages through exactly its tasks, newest first', async (t) => {
  const { store, accountId, tasks } = await storeWith(t, (id) => mixedTasks(id, 150, 42));
  const windowStart = new Date(START + 10_000);
  const windowEnd = new Date(START + 40_000);
  const filters: { name: string; query: Partial<TaskListQuery>; matches: (task: TaskRecord) => boolean }[] = [
    { name: 'no filter', query: {}, matches: () => true },
    ...TASK_STATUSES.map((status) => ({ name: `status ${status}`, query: { status }, matches: (task: TaskRecord) => task.status === status })),
    ...MODELS.map((model) => ({ name: `model ${model}`, query: { model }, matches: (task: TaskRecord) => task.model === model })),
    {
      name: 'status and model',
      query: { status: 'COMPLETED', model: 'beta-v5-pro' },
      matches: (task) => task.status === 'COMPLETED' && task.model === 'beta-v5-pro',
    },
    {
      name: 'a time window',
      query: { createdAfter: windowStart, createdBefore: windowEnd },
      matches: (task) => task.createdAt > windowStart && task.createdAt < windowEnd,
    },
    {
      name: 'a time window and a status',
      query: { createdAfter: windowStart, createdBefore: windowEnd, status: 'FAILED' },
      matches: (task) => task.createdAt > windowStart && task.createdAt < windowEnd && task.status === 'FAILED',
    },
  ];
  for (const filter of filters) {
    const expected = newestFirst(tasks.filter(filter.matches));
    t.ok(expected.length > 0, `${filter.name}: the mix has tasks to list`);
    for (const limit of [1, 7, 200]) {
      const pages = await allPages(t, store, accountId, { ...filter.query, limit });
      t.strictSame(pages.flat(), expected, `${filter.name}, pages of ${limit}`);
      t.equal(pages.length, Math.max(1, Math.ceil(expected.length / limit)), `${filter.name}, pages of ${limit}: no empty last page`);
    }
  }
});

t.test('a page holds whole tasks, equal to reading each one', async (t) => {
  const { store, accountId } = await storeWith(t, (id) => mixedTasks(id, 30, 3));
  const page = await store.listTasks(accountId, { limit: 10 });
  for (const task of page.items) t.strictSame(task, await store.getTask(accountId, task.id));
});

t.test('an account without tasks, or without tasks of the model asked for, lists nothing', async (t) => {
  const { store, accountId } = await storeWith(t, (id) => mixedTasks(id, 20, 5).filter((task) => task.model !== 'beta-v5-pro'));
  t.strictSame(await store.listTasks(accountId, { limit: 10, model: 'beta-v5-pro' }), { items: [], nextCursor: null });
  const now = new Date();
  const empty = await store.createAccount({ id: newIdAt(now), name: 'empty', initialTokens: 0, now });
  t.strictSame(await store.listTasks(empty.id, { limit: 10 }), { items: [], nextCursor: null });
});

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

t.test('a page size that is not an integer from 1 to 1000 is refused before it reaches the SQL', async (t) => {
  const { store, accountId } = await storeWith(t, (id) => mixedTasks(id, 5, 1));
  for (const limit of [0, -1, 1.5, 1001, Number.NaN]) {
    await t.rejects(store.listTasks(accountId, { limit }), RangeError, `limit ${limit}`);
  }
});
