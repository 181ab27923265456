import { setTimeout as delay } from 'node:timers/promises';
import { generationRetryDelayMs } from '../core/task-retry.js';
import type { TaskRecord } from '../core/task.js';
import { dependencyFailureOf } from '../services/dependency-failure.js';
import type { WorkerLog } from './worker-log.js';

export interface StorageRetryOptions {
  retryBaseMs: number;
  deadlineMs: number;
  now: () => Date;
  random: () => number;
  log: WorkerLog;
}

/**
 * Runs op again while it fails because a dependency is away, with the retry backoff, for as long
 * as the task's deadline allows: a storage blip does not throw away an image already generated
 * (and paid for), and spends none of the task's attempts. Past the deadline, or on any other
 * error, op's error is thrown.
 */
export async function whileDependencyAway<T>(
  task: TaskRecord,
  signal: AbortSignal,
  what: string,
  op: () => Promise<T>,
  options: StorageRetryOptions,
): Promise<T> {
  for (let retries = 1; ; retries++) {
    try {
      return await op();
    } catch (error) {
      const wait = generationRetryDelayMs(retries, options.retryBaseMs, options.random);
      // Up to the deadline itself, and once more at it: a task given up any earlier would only
      // be generated again (and paid for again) after its deferral.
      const untilDeadline = task.createdAt.getTime() + options.deadlineMs - options.now().getTime();
      if (!dependencyFailureOf(error) || untilDeadline <= 0) throw error;
      const waitMs = Math.min(wait, untilDeadline);
      options.log.warn(
        { err: error, task_id: task.id, retry_in_ms: waitMs },
        `${what}: a dependency is unavailable; retrying`,
      );
      await delay(waitMs, undefined, { signal });
    }
  }
}
