import { TASK_STATUSES } from '../../schemas/resources.js';
import type { WebhookEventType } from '../../schemas/webhooks.js';
import { isTerminal, nextStatus, refundsOnEntry, statusesAllowing, type TaskEvent, type TaskStatus } from './task.js';

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

/** One of an account's runnable tasks, as a claim sees it. */
export interface ClaimCandidate {
  id: string;
  accountId: string;
  /** The account's tasks in progress now. */
  inProgress: number;
}

/**
 * The order in which claims take the accounts' runnable tasks (docs/design.md §3.5): accounts in
 * turn, the one with the fewest tasks in progress first, then the oldest task (UUIDv7 ids sort by
 * creation). One account's burst thus delays another account's task by at most its share of the
 * slots.
 *
 * Given several tasks of an account (a claim of several at once, or spares for claimers that meet
 * each other), its n-th oldest is placed as if the n − 1 before it were already in progress:
 * taking the first k of the order is what k claims one after another would take. (An account's
 * places only grow with n, so the order is a sort, not a simulation.)
 */
export function claimOrder<T extends ClaimCandidate>(candidates: readonly T[]): T[] {
  const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const olderOfAccount = new Map<string, number>();
  return [...candidates]
    .sort(byId)
    .map((candidate) => {
      const older = olderOfAccount.get(candidate.accountId) ?? 0;
      olderOfAccount.set(candidate.accountId, older + 1);
      return { candidate, turn: candidate.inProgress + older };
    })
    .sort((a, b) => a.turn - b.turn || byId(a.candidate, b.candidate))
    .map(({ candidate }) => candidate);
}

/**
 * When a store next looks for lost leases (afterLostLease), as an epoch millisecond: a lease
 * cannot run out before the earliest one live at the last look, nor before a lease granted since
 * has (`leaseMs` from its claim), so looking once per lease interval finds every lost lease, at
 * most one interval late for a lease another process grants for less than `leaseMs`.
 */
export function nextLostLeaseLook(lookedAt: Date, leaseMs: number, earliestLiveLease: Date | null): number {
  const intervalLater = lookedAt.getTime() + leaseMs;
  return earliestLiveLease ? Math.min(intervalLater, earliestLiveLease.getTime()) : intervalLater;
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
  return admitsActiveTasks(active, 1, maxActiveTasks);
}

/** The cap for several new active tasks at once (a request for several images): all fit, or none is admitted. */
export function admitsActiveTasks(active: number, adding: number, maxActiveTasks: number): boolean {
  return active + adding <= maxActiveTasks;
}

/** Whether a task in `status` counts against the active-task cap. */
export function countsAsActive(status: TaskStatus): boolean {
  return !isTerminal(status);
}

/** The statuses that count against the cap: the stores count an account's tasks in these (activeTasksCountLimit). */
export const ACTIVE_STATUSES: readonly TaskStatus[] = TASK_STATUSES.filter(countsAsActive);

/**
 * How far an admission counts the account's active tasks: one past the cap is enough to refuse,
 * so that the count costs at most that many index entries however many tasks an account has.
 */
export function activeTasksCountLimit(maxActiveTasks: number): number {
  return maxActiveTasks + 1;
}

/** The webhook event a move into `status` emits (docs/design.md §3.6), or null: only terminal states emit one. */
export function webhookEventFor(status: TaskStatus): WebhookEventType | null {
  return isTerminal(status) ? (`image.generation.${status.toLowerCase()}` as WebhookEventType) : null;
}

/** A move of the queue: the status a task must be in for it, and the status it enters. */
export interface QueueMove {
  from: TaskStatus;
  to: TaskStatus;
}

/** The queue's own moves start from a single status of the state table (task.ts), whatever it becomes. */
function queueMove(event: Extract<TaskEvent, 'claim' | 'release'>): QueueMove {
  const from = statusesAllowing(event);
  if (from.length !== 1)
    throw new Error(`A ${event} must start from one status; the state table allows ${from.join(', ')}.`);
  return { from: from[0], to: nextStatus(from[0], event) };
}

/**
 * A claim: a queued task (`from`, the status the queue is made of) becomes a running attempt
 * (`to`, the status that holds a lease). Stores bind both into their claim statements.
 */
export const CLAIM: QueueMove = queueMove('claim');

/** A release: a running attempt goes back to the queue (a lost lease, a retry, a deferral, a shutdown). */
export const RELEASE: QueueMove = queueMove('release');

/**
 * How a release counts: a deferred one (no capacity, a dependency away) gives the attempt back, so
 * that only the task's deadline can end it; any other spends it.
 */
export function deferredAttemptsAdded(release: { deferred: boolean }): 0 | 1 {
  return release.deferred ? 1 : 0;
}

export type FinishingEvent = Extract<TaskEvent, 'complete' | 'fail' | 'cancel'>;

/**
 * Which task a finish may move: `attempt`, the worker's running attempt (fenced by its number);
 * `queued`, a task still waiting (a deadline passed before any claim; fenced by the attempt read
 * in the same transaction); `any`, the task in whatever state the event allows (a client's cancel,
 * whichever attempt holds it).
 */
export type FinishScope = 'attempt' | 'queued' | 'any';

/** A move into a terminal status and everything that goes with it, applied by a store in one transaction. */
export interface TaskFinish {
  /** The statuses the conditional update may move the task from; none other is touched. */
  from: TaskStatus[];
  to: TaskStatus;
  /** Whether the update only applies to the attempt named (the worker's fencing token). */
  fencedByAttempt: boolean;
  /**
   * How the move changes the account's active tasks (-1: it frees room under the cap). Nothing
   * writes it: the admission counts the active tasks from the tasks themselves.
   */
  activeTasksDelta: number;
  /** Whether the task's cost goes back to the account. */
  refund: boolean;
  /** The event the outbox gets when the task has a webhook_url. */
  webhookEvent: WebhookEventType | null;
}

/** The finish of a task by `event` within `scope` (see FinishScope), from the state table. */
export function taskFinish(event: FinishingEvent, scope: FinishScope): TaskFinish {
  const from = scope === 'attempt' ? [CLAIM.to] : scope === 'queued' ? [CLAIM.from] : statusesAllowing(event);
  const targets = new Set(from.map((status) => nextStatus(status, event)));
  const activeness = new Set(from.map(countsAsActive));
  // One UPDATE moves the task from any of `from`: all of them must end alike and count alike.
  if (targets.size !== 1 || activeness.size !== 1)
    throw new Error(`A ${event} from ${from.join(', ')} does not move every task alike.`);
  const to = nextStatus(from[0], event);
  return {
    from,
    to,
    fencedByAttempt: scope !== 'any',
    activeTasksDelta: Number(countsAsActive(to)) - Number(countsAsActive(from[0])),
    refund: refundsOnEntry(to),
    webhookEvent: webhookEventFor(to),
  };
}
