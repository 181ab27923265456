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
  attempt: number,
  maxAttempts: number,
): { action: 'requeue' } | { action: 'fail'; error: TaskFailure } {
  return attempt >= maxAttempts ? { action: 'fail', error: WORKER_LOST } : { action: 'requeue' };
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

/** The webhook event a move into `status` emits (DESIGN 3.6), or null: only terminal states emit one. */
export function webhookEventFor(status: TaskStatus): WebhookEventType | null {
  return isTerminal(status) ? (`image.generation.${status.toLowerCase()}` as WebhookEventType) : null;
}
