import { afterFailedAttempt } from '../core/task-retry.js';
import type { TaskRecord } from '../core/task.js';
import { GenerationError } from '../generators/port.js';
import { dependencyFailureOf } from '../services/dependency-failure.js';
import type { Store } from '../store/port.js';
import { AttemptAborted } from './attempt-lease.js';
import type { WorkerLog } from './worker-log.js';

export interface AttemptFailureOptions {
  store: Pick<Store, 'tasks'>;
  deadlineMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  now: () => Date;
  random: () => number;
  log: WorkerLog;
}

interface FailureDescription {
  code: string;
  message: string;
  transient: boolean;
  /** An unexpected error: logged in full, but its text is not shown to the client. */
  internal: boolean;
  /** A model provider's Retry-After: the retry waits at least this long. */
  retryAfterMs?: number;
  /** A model provider's status and reason, for the operator's log only. */
  upstream?: GenerationError['upstream'];
  /** The provider refused the call for capacity: not the task's failure. */
  capacity?: boolean;
  /** At most this many attempts end in this failure (GenerationError.maxAttempts). */
  maxAttempts?: number;
}

/**
 * What a failed attempt leaves (core afterFailedAttempt decides, this writes it): nothing when the
 * task was taken away, back to the queue at shutdown, deferred without spending an attempt (a
 * dependency away, a provider at capacity), retried after a backoff, or failed with its refund.
 */
export async function settleFailedAttempt(
  task: TaskRecord,
  error: unknown,
  options: AttemptFailureOptions,
): Promise<void> {
  const { store, log } = options;
  const now = options.now();
  if (error instanceof AttemptAborted && error.reason === 'ownership_lost') return;
  if (error instanceof AttemptAborted && error.reason === 'shutdown') {
    await store.tasks.requeueTask({ taskId: task.id, attempt: task.attempt, runAfter: now, now });
    log.info({ task_id: task.id }, 'task released at shutdown');
    return;
  }

  // null: a dependency of ours was away, which is not the task's failure.
  const failure = dependencyFailureOf(error) ? null : describeFailure(error);
  const next = afterFailedAttempt(task, failure ? { kind: 'generation', ...failure } : { kind: 'dependency' }, {
    now,
    deadlineMs: options.deadlineMs,
    maxAttempts: options.maxAttempts,
    retryBaseMs: options.retryBaseMs,
    random: options.random,
  });
  const logged = {
    task_id: task.id,
    attempt: task.attempt,
    code: failure?.code,
    upstream: failure?.upstream,
  };
  if (next.action === 'defer' || next.action === 'retry') {
    // Back to the queue after the delay; a deferral does not spend one of the task's attempts.
    await store.tasks.requeueTask({
      taskId: task.id,
      attempt: task.attempt,
      runAfter: new Date(now.getTime() + next.delayMs),
      now,
      deferred: next.action === 'defer',
    });
    if (next.action === 'retry') log.warn({ ...logged, retry_in_ms: next.delayMs }, 'generation failed; will retry');
    else if (!failure)
      log.warn(
        { err: error, task_id: task.id, retry_in_ms: next.delayMs },
        'a dependency is unavailable; task deferred',
      );
    else
      log.info(
        { ...logged, retry_in_ms: next.delayMs },
        'provider at capacity; task deferred without spending an attempt',
      );
    return;
  }
  await store.tasks.failTask({ taskId: task.id, attempt: task.attempt, error: next.error, now });
  if (!failure) log.warn({ err: error, task_id: task.id, code: next.error.code }, 'task failed: a dependency was away');
  else if (next.waitPastDeadline)
    log.warn(
      { ...logged, retry_after_ms: failure.retryAfterMs },
      'task failed: the provider asks for a wait past its deadline',
    );
  else log.warn({ ...logged, err: failure.internal ? error : undefined }, 'task failed');
}

function describeFailure(error: unknown): FailureDescription {
  if (error instanceof GenerationError) {
    const { code, message, transient, retryAfterMs, upstream, capacity, maxAttempts } = error;
    return { code, message, transient, internal: false, retryAfterMs, upstream, capacity, maxAttempts };
  }
  if (error instanceof AttemptAborted) {
    return { code: 'generation_timeout', message: 'The generation took too long.', transient: true, internal: false };
  }
  return { code: 'internal_error', message: 'The generation failed on our side.', transient: true, internal: true };
}
