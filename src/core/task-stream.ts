import { isTerminal, type TaskRecord } from './task.js';

/**
 * The position of a task's state in the order of its changes: the id of its event on the task's
 * stream (docs/design.md §3.4). A task moves CREATED → IN_PROGRESS (a claim raises `attempt`) → CREATED
 * again (a release keeps `attempt`) or a terminal state, and `attempt` never decreases; so within
 * an attempt a claim comes first, then a release, then the end: 3·attempt + 0, 1, 2. A takeover
 * (IN_PROGRESS under a higher attempt) is a change too.
 */
export function taskStepOf(task: Pick<TaskRecord, 'status' | 'attempt'>): number {
  const within = task.status === 'IN_PROGRESS' ? 0 : task.status === 'CREATED' ? 1 : 2;
  return task.attempt * 3 + within;
}

/** The step a client last saw (its Last-Event-ID), or null when the header is absent or not ours. */
export function parseLastEventId(header: string | undefined | null): number | null {
  if (header === undefined || header === null || !/^[0-9]{1,15}$/.test(header)) return null;
  return Number(header);
}

/**
 * What a stream sends next for the task as it is now, given the last step the client saw. Steps
 * only grow, so any other step than the one seen is news; an id beyond the task's step was not
 * ours, and the task is sent as it is.
 */
export function nextStreamEvent(task: TaskRecord, lastSeen: number | null): 'task' | 'done' | 'wait' {
  if (lastSeen === null || taskStepOf(task) !== lastSeen) return 'task';
  return isTerminal(task.status) ? 'done' : 'wait';
}
