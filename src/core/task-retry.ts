import {
  afterDependencyFailure,
  attemptsSpent,
  DEADLINE_EXCEEDED,
  isPastDeadline,
  type TaskFailure,
} from './task-execution.js';

/**
 * Backoff before retrying a task whose generation failed transiently: exponential from `baseMs`,
 * capped, with ±20 % jitter so that tasks failed together do not retry together. An upstream's
 * Retry-After is a floor: retrying sooner would only earn another 429.
 */
export function generationRetryDelayMs(
  attemptsMade: number,
  baseMs: number,
  random: () => number,
  retryAfterMs = 0,
): number {
  const exponential = Math.min(baseMs * 2 ** Math.max(0, attemptsMade - 1), baseMs * 32);
  return Math.max(Math.round(exponential * (0.8 + 0.4 * random())), retryAfterMs);
}

/** A generation that failed, as the queue's decision needs it (the worker's GenerationError, described). */
export interface GenerationFailure {
  code: string;
  message: string;
  /** Worth another attempt: a timeout, a provider's 5xx, an error of ours. */
  transient: boolean;
  /** The provider refused the call for capacity: not the task's failure. */
  capacity?: boolean;
  /** The provider's Retry-After: no retry sooner. */
  retryAfterMs?: number;
  /** At most this many attempts end in this failure. */
  maxAttempts?: number;
}

/** Why an attempt ended: a dependency of ours was away (the store, the blobs, the disk), or the generation failed. */
export type AttemptFailure = { kind: 'dependency' } | ({ kind: 'generation' } & GenerationFailure);

/**
 * What a failed attempt becomes: `fail` (refunded, with the error the client sees), `defer` (back to
 * the queue without spending one of its attempts: the failure was not the task's) or `retry` (back
 * to the queue, the attempt spent). `waitPastDeadline` marks a fail because the provider asked
 * for a wait that ends past the task's deadline.
 */
export type FailedAttemptOutcome =
  | { action: 'fail'; error: TaskFailure; waitPastDeadline: boolean }
  | { action: 'defer'; delayMs: number }
  | { action: 'retry'; delayMs: number };

export function afterFailedAttempt(
  task: { attempt: number; deferredAttempts: number; createdAt: Date },
  failure: AttemptFailure,
  policy: { now: Date; deadlineMs: number; maxAttempts: number; retryBaseMs: number; random: () => number },
): FailedAttemptOutcome {
  const { now, deadlineMs, retryBaseMs, random } = policy;
  const deferral = (retryAfterMs?: number) =>
    generationRetryDelayMs(task.deferredAttempts + 1, retryBaseMs, random, retryAfterMs);
  if (failure.kind === 'dependency') {
    // Not the task's failure: it waits for the dependency until its deadline, which alone fails it.
    const next = afterDependencyFailure(task, now, deadlineMs);
    return next.action === 'fail'
      ? { action: 'fail', error: next.error, waitPastDeadline: false }
      : { action: 'defer', delayMs: deferral() };
  }
  const { retryAfterMs } = failure;
  if (
    (failure.capacity || failure.transient) &&
    retryAfterMs !== undefined &&
    isPastDeadline(task.createdAt, new Date(now.getTime() + retryAfterMs), deadlineMs)
  ) {
    // A quota reset hours away: failed now as the deadline would fail it, refunded, rather than
    // holding the client's tokens until then.
    return { action: 'fail', error: DEADLINE_EXCEEDED, waitPastDeadline: true };
  }
  if (failure.capacity) return { action: 'defer', delayMs: deferral(retryAfterMs) };
  if (failure.transient && attemptsSpent(task) < Math.min(policy.maxAttempts, failure.maxAttempts ?? Infinity))
    return { action: 'retry', delayMs: generationRetryDelayMs(task.attempt, retryBaseMs, random, retryAfterMs) };
  return { action: 'fail', error: { code: failure.code, message: failure.message }, waitPastDeadline: false };
}
