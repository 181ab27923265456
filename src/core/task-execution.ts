import type { WebhookEventType } from '../../schemas/webhooks.js';
import { isTerminal, type TaskStatus } from './task.js';

/**
 * The queue's decisions, as pure functions that every store adapter applies inside its own
 * transaction: the adapters translate them into SQL and decide nothing themselves.
 */

export interface TaskFailure {
  code: string;
  message: string;
}

export const WORKER_LOST: TaskFailure = {
  code: 'worker_lost',
  message: 'The task was interrupted too many times and was not completed.',
};
export const DEADLINE_EXCEEDED: TaskFailure = {
  code: 'deadline_exceeded',
  message: 'The task could not be completed in time.',
};

/**
 * A task whose worker's lease ran out: back to the queue for another attempt, or, when that was its
 * last allowed attempt, failed (and refunded).
 */
export function afterLostLease(
  task: { attempt: number; deferredAttempts: number },
  maxAttempts: number,
): { action: 'requeue' } | { action: 'fail'; error: TaskFailure } {
  return attemptsSpent(task) >= maxAttempts ? { action: 'fail', error: WORKER_LOST } : { action: 'requeue' };
}

/**
 * Claims that spent one of the task's attempts: a claim deferred for want of capacity (the
 * provider's, or our storage's) is not the task's failure (docs/design.md §3.5).
 */
export function attemptsSpent(task: { attempt: number; deferredAttempts: number }): number {
  return task.attempt - task.deferredAttempts;
}

/** One account's next runnable task, as a claim sees it. */
export interface ClaimCandidate {
  id: string;
  accountId: string;
  /** The account's tasks in progress now. */
  inProgress: number;
}

/**
 * The order in which a claim tries the accounts' next tasks (docs/design.md §3.5): accounts in turn, the
 * one with the fewest tasks in progress first, then the oldest task (UUIDv7 ids sort by creation).
 * One account's burst thus delays another account's task by at most its share of the slots.
 */
export function claimOrder<T extends ClaimCandidate>(candidates: readonly T[]): T[] {
  return [...candidates].sort((a, b) => a.inProgress - b.inProgress || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * A task whose attempt met a dependency that is away (the store, the blob store, the disk): not
 * the task's failure, so no attempt is spent on it; it waits (deferred) until its deadline, which
 * alone fails it (docs/design.md §3.5).
 */
export function afterDependencyFailure(
  task: { createdAt: Date },
  now: Date,
  deadlineMs: number,
): { action: 'defer' } | { action: 'fail'; error: TaskFailure } {
  return isPastDeadline(task.createdAt, now, deadlineMs)
    ? { action: 'fail', error: DEADLINE_EXCEEDED }
    : { action: 'defer' };
}

/** Tasks created at or before this instant are past their deadline at `now` (isPastDeadline). */
export function deadlineCutoff(now: Date, deadlineMs: number): Date {
  return new Date(now.getTime() - deadlineMs);
}

/** Whether a task created at createdAt may no longer start at now: it fails instead of running. */
export function isPastDeadline(createdAt: Date, now: Date, deadlineMs: number): boolean {
  return createdAt.getTime() + deadlineMs <= now.getTime();
}

/**
 * The cap on active tasks (CREATED + IN_PROGRESS) per account: whether one more may be created
 * when the account has `active`. Checked before the balance: the cap is what a client can wait out.
 */
export function admitsAnotherActiveTask(active: number, maxActiveTasks: number): boolean {
  return active < maxActiveTasks;
}

/** Whether a task in `status` counts against the active-task cap. */
export function countsAsActive(status: TaskStatus): boolean {
  return !isTerminal(status);
}

/** The webhook event a move into `status` emits (docs/design.md §3.6), or null: only terminal states emit one. */
export function webhookEventFor(status: TaskStatus): WebhookEventType | null {
  return isTerminal(status) ? (`image.generation.${status.toLowerCase()}` as WebhookEventType) : null;
}
