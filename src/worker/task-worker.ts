import type { BlobStore } from '../blobs/port.js';
import type { TaskRecord } from '../core/task.js';
import type { WorkerMetrics } from '../services/capacity-metrics.js';
import type { TaskEvents } from '../services/task-events.js';
import type { Store } from '../store/port.js';
import { settleFailedAttempt, type AttemptFailureOptions } from './attempt-failure.js';
import { type AttemptAborted, holdAttempt, type AttemptLeaseOptions } from './attempt-lease.js';
import { BackendLane, type WorkerBackend } from './backend-lane.js';
import { DispatchLoop } from './dispatch-loop.js';
import { generateImages, type GeneratorCallOptions } from './generator-call.js';
import { describeImages, storeAndComplete, type ResultStorageOptions } from './result-storage.js';
import { whileDependencyAway, type StorageRetryOptions } from './storage-retry.js';
import { silentLog, type WorkerLog } from './worker-log.js';

// The parts' types, where the worker's users have always found them.
export { safetyIdentifier } from './generator-call.js';
export type { WorkerBackend, WorkerLog, WorkerMetrics };

export interface TaskWorkerOptions {
  store: Pick<Store, 'tasks' | 'media' | 'backendLimits'>;
  blobs: BlobStore;
  backends: WorkerBackend[];
  /** In-process signals; absent in a process that shares nothing with the API. */
  events?: TaskEvents;
  leaseMs: number;
  maxAttempts: number;
  deadlineMs: number;
  generationTimeoutMs: number;
  retryBaseMs: number;
  pollMs: number;
  resultRetentionMs: number;
  now?: () => Date;
  random?: () => number;
  log?: WorkerLog;
  metrics?: WorkerMetrics;
  /** Key of the keyed hash sent to providers as the account's safety identifier; unset = none sent. */
  safetyIdentifierKey?: string;
}

/**
 * Claims tasks from the store and runs them: claim → generate → store images → finish, with a
 * heartbeat renewing the lease meanwhile. A task is claimed only when its backend has room for
 * one more call (docs/design.md §4.2): a claimed task never waits for a slot, so its lease,
 * deadline and place in the queue stay honest. It composes its parts: the dispatch loop
 * (dispatch-loop.ts), the attempt's lease (attempt-lease.ts), the generator call and its
 * recording (generator-call.ts), the result's storage (result-storage.ts) retried while a
 * dependency is away (storage-retry.ts), and what a failed attempt leaves (attempt-failure.ts).
 */
export class TaskWorker {
  private readonly now: () => Date;
  private readonly log: WorkerLog;
  private readonly inFlight = new Map<string, { abort(reason: 'shutdown'): void }>();
  private readonly lanes: BackendLane[];
  private readonly dispatch: DispatchLoop;
  private readonly leases: AttemptLeaseOptions;
  private readonly calls: GeneratorCallOptions;
  private readonly results: ResultStorageOptions;
  private readonly retries: StorageRetryOptions;
  private readonly failures: AttemptFailureOptions;
  private unsubscribeCreated: (() => void) | null = null;
  private nextDeadlineSweep = 0;

  constructor(private readonly options: TaskWorkerOptions) {
    const now = options.now ?? (() => new Date());
    const random = options.random ?? Math.random;
    const log = options.log ?? silentLog;
    this.now = now;
    this.log = log;
    const { store, blobs, events, metrics } = options;
    this.lanes = options.backends.map((backend) => new BackendLane(backend));
    this.dispatch = new DispatchLoop({
      lanes: this.lanes,
      pollMs: options.pollMs,
      now,
      beforeClaims: () => this.sweepDeadlines(),
      claim: (lane, limit) => this.claim(lane, limit),
      run: (lane, task) => this.runTask(lane, task),
      log,
      metrics,
    });
    this.leases = {
      store,
      events,
      leaseMs: options.leaseMs,
      generationTimeoutMs: options.generationTimeoutMs,
      now,
      log,
    };
    this.calls = {
      store,
      blobs,
      now,
      log,
      metrics,
      safetyIdentifierKey: options.safetyIdentifierKey,
      onCallRecorded: () => this.poke(),
    };
    this.results = { store, blobs, now };
    const backoff = { retryBaseMs: options.retryBaseMs, deadlineMs: options.deadlineMs, now, random, log };
    this.retries = backoff;
    this.failures = { ...backoff, store, maxAttempts: options.maxAttempts };
  }

  start(): void {
    this.unsubscribeCreated = this.options.events?.onCreated((model) => this.pokeFor(model)) ?? null;
    this.dispatch.start();
  }

  /** Looks for work at once (a task was created, or a slot came free). */
  poke(): void {
    this.dispatch.poke();
  }

  /** Looks for work at once for the backends that run `model` (every backend when it is not told). */
  private pokeFor(model: string | undefined): void {
    this.dispatch.poke(
      model === undefined
        ? this.lanes
        : this.lanes.filter((lane) => !lane.backend.models || lane.backend.models.includes(model)),
    );
  }

  /**
   * Stops claiming, lets running tasks finish for up to graceMs, then aborts the rest and puts
   * them back in the queue for another worker.
   */
  async stop(graceMs: number): Promise<void> {
    this.unsubscribeCreated?.();
    await this.dispatch.stop();
    const allDone = this.dispatch.allDone();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace_over'>((resolve) => {
      timer = setTimeout(() => resolve('grace_over'), graceMs);
    });
    if ((await Promise.race([allDone, graceOver])) === 'grace_over') {
      for (const attempt of this.inFlight.values()) attempt.abort('shutdown');
      await allDone;
    }
    clearTimeout(timer);
  }

  /** Claims and runs at most one task, to its end; false when there was nothing to do. */
  async runOnce(): Promise<boolean> {
    for (const lane of this.lanes) {
      if (!lane.hasRoom(this.now().getTime())) continue;
      const [task] = await this.claim(lane, 1);
      if (!task) continue;
      lane.running += 1;
      try {
        await this.runTask(lane, task);
      } finally {
        lane.running -= 1;
      }
      return true;
    }
    return false;
  }

  private claim(lane: BackendLane, limit: number): Promise<TaskRecord[]> {
    const { backend } = lane;
    return this.options.store.tasks.claimTasks(
      {
        now: this.now(),
        leaseMs: this.options.leaseMs,
        maxAttempts: this.options.maxAttempts,
        deadlineMs: this.options.deadlineMs,
        models: backend.models,
        sharedLimit: backend.sharedLimit ? { backend: backend.name, settings: backend.sharedLimit } : undefined,
      },
      limit,
    );
  }

  /**
   * Tasks that wait past their deadline fail even while their backend has no room to claim them
   * (a provider at capacity for longer than the deadline): at most once per poll interval.
   */
  private async sweepDeadlines(): Promise<void> {
    const now = this.now();
    if (now.getTime() < this.nextDeadlineSweep) return;
    this.nextDeadlineSweep = now.getTime() + this.options.pollMs;
    const failed = await this.options.store.tasks.failTasksPastDeadline(now, this.options.deadlineMs);
    for (const taskId of failed) this.options.events?.taskChanged(taskId);
    if (failed.length > 0) this.log.warn({ tasks: failed.length }, 'tasks failed past their deadline');
  }

  /** One attempt: generate under the lease, store and complete (retried while storage is away), or settle its failure. */
  private async runTask(lane: BackendLane, task: TaskRecord): Promise<void> {
    // Before the lease listens: the attempt must not take its own claim for a change that ended it.
    this.options.events?.taskClaimed(task.id);
    const lease = holdAttempt(task, this.leases);
    this.inFlight.set(task.id, lease);
    try {
      const images = await generateImages(lane, task, lease.signal, this.calls);
      // The generation is done and paid for: storing it waits out a storage outage up to the
      // task's deadline instead of the generation's timeout.
      lease.generationDone();
      const media = describeImages(images, this.now(), this.options.resultRetentionMs);
      const completed = await whileDependencyAway(
        task,
        lease.signal,
        'storing the result',
        () => storeAndComplete(task, images, media, this.results),
        this.retries,
      );
      if (!completed) {
        // Fenced out: a cancel or a newer attempt decided; this attempt's images belong to no one.
        await Promise.all(media.map((m) => this.options.blobs.delete(m.blobKey)));
        this.log.info({ task_id: task.id, attempt: task.attempt }, 'late result discarded');
      }
    } catch (error) {
      const reason = lease.signal.aborted ? (lease.signal.reason as AttemptAborted) : error;
      await settleFailedAttempt(task, reason, this.failures);
    } finally {
      lease.release();
      this.inFlight.delete(task.id);
      this.options.events?.taskChanged(task.id);
    }
  }
}
