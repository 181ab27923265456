import type { Test } from 'tap';
import { TASK_STATUSES } from '../../schemas/resources.js';
import { createTask, type TaskRecord, type TaskStatus } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import type { Store, TaskListQuery } from '../../src/store/port.js';

/** A model the catalog does not offer (any more): its tasks must still be listed. */
export const MIXED_MODELS = ['alpha-pro', 'beta-v5-pro', 'gamma-retired'];
export const MIX_START = Date.parse('2026-03-01T00:00:00Z');

/** Tasks of every model and status, three in each second used, in a fixed pseudo-random mix, for list tests. */
export function mixedTasks(accountId: string, count: number, seed: number): TaskRecord[] {
  let state = seed;
  const next = (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state % n;
  };
  // In creation order, as ids are made: a UUIDv7 generator never goes back to an earlier millisecond.
  return Array.from({ length: count }, (_, i) => {
    const at = new Date(MIX_START + Math.floor(i / 3) * 1000);
    const task = createTask(
      { model: 'alpha-pro', prompt: `task ${i}` },
      { accountId, now: at, newId: () => newIdAt(at) },
    );
    const status = TASK_STATUSES[next(TASK_STATUSES.length)] as TaskStatus;
    const finished = status === 'CREATED' ? {} : { startedAt: at, completedAt: status === 'IN_PROGRESS' ? null : at };
    return { ...task, model: MIXED_MODELS[next(MIXED_MODELS.length)], status, ...finished };
  });
}

/** Every page of a list, followed by its cursor: the ids of each page. */
export async function allPages(
  t: Test,
  store: Store,
  accountId: string,
  query: Omit<TaskListQuery, 'cursor'>,
): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const page = await store.tasks.listTasks(accountId, { ...query, cursor });
    t.ok(page.items.length <= query.limit);
    pages.push(page.items.map((task) => task.id));
    cursor = page.nextCursor ?? undefined;
  } while (cursor && pages.length < 1000);
  return pages;
}

export const newestFirst = (tasks: TaskRecord[]): string[] =>
  tasks
    .map((task) => task.id)
    .sort()
    .reverse();
