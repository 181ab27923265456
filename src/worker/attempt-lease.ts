import type { TaskRecord } from '../core/task.js';
import type { TaskEvents } from '../services/task-events.js';
import type { Store } from '../store/port.js';
import type { WorkerLog } from './worker-log.js';

/** Why an attempt was aborted; decides what happens to the task afterwards. */
export type AbortReason = 'shutdown' | 'ownership_lost' | 'timeout';

export class AttemptAborted extends Error {
  constructor(readonly reason: AbortReason) {
    super(`attempt aborted: ${reason}`);
  }
}

export interface AttemptLeaseOptions {
  store: Pick<Store, 'tasks'>;
  events?: TaskEvents;
  leaseMs: number;
  generationTimeoutMs: number;
  now: () => Date;
  log: WorkerLog;
}

/** A running attempt's hold on its task: the signal its work obeys, and what ends the hold. */
export interface AttemptLease {
  signal: AbortSignal;
  abort(reason: AbortReason): void;
  /** The generation is done: its timeout no longer applies (storing waits for the deadline instead). */
  generationDone(): void;
  /** Stops the heartbeat, the timeout and the listening. */
  release(): void;
}

/**
 * Holds a claimed attempt: renews its lease every third of it (a renewal refused means another
 * attempt or a cancel took the task: ownership_lost), hears a cancel in this process at once, and
 * aborts the generation after generationTimeoutMs.
 */
export function holdAttempt(task: TaskRecord, options: AttemptLeaseOptions): AttemptLease {
  const controller = new AbortController();
  const abort = (reason: AbortReason) => {
    if (!controller.signal.aborted) controller.abort(new AttemptAborted(reason));
  };
  // A cancel in this process is heard at once; one elsewhere shows up at the next heartbeat.
  const unsubscribe = options.events?.onChanged(task.id, () => abort('ownership_lost'));
  const heartbeat = setInterval(
    () => {
      options.store.tasks.renewLease(task.id, task.attempt, options.now(), options.leaseMs).then(
        (owned) => owned || abort('ownership_lost'),
        (error: unknown) => options.log.warn({ err: error, task_id: task.id }, 'lease renewal failed'),
      );
    },
    Math.max(10, Math.floor(options.leaseMs / 3)),
  );
  const timeout = setTimeout(() => abort('timeout'), options.generationTimeoutMs);
  return {
    signal: controller.signal,
    abort,
    generationDone: () => clearTimeout(timeout),
    release: () => {
      clearInterval(heartbeat);
      clearTimeout(timeout);
      unsubscribe?.();
    },
  };
}
