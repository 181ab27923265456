import { createHash } from 'node:crypto';
import type { BlobStore } from '../blobs/port.js';
import { generationRetryDelayMs } from '../core/task-retry.js';
import type { TaskRecord } from '../core/task.js';
import { GenerationError, type ImageGenerator } from '../generators/port.js';
import { newIdAt } from '../ids.js';
import { mediaBlobKey, ORPHAN_BLOB_GRACE_MS } from '../services/media-service.js';
import type { TaskEvents } from '../services/task-events.js';
import type { GeneratedMediaInput, Store } from '../store/port.js';
import { PollingSlots } from './polling-slots.js';

export interface TaskWorkerOptions {
  store: Store;
  blobs: BlobStore;
  generator: ImageGenerator;
  /** In-process signals; absent in a process that shares nothing with the API. */
  events?: TaskEvents;
  concurrency: number;
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
}

export interface WorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Why an attempt was aborted; decides what happens to the task afterwards. */
type AbortReason = 'shutdown' | 'ownership_lost' | 'timeout';

class AttemptAborted extends Error {
  constructor(readonly reason: AbortReason) {
    super(`attempt aborted: ${reason}`);
  }
}

const silentLog: WorkerLog = { info() {}, warn() {}, error() {} };

/**
 * Claims tasks from the store and runs them: claim → generate → store images → finish, with a
 * heartbeat renewing the lease meanwhile. Runs `concurrency` slots in this process.
 */
export class TaskWorker {
  private readonly now: () => Date;
  private readonly random: () => number;
  private readonly log: WorkerLog;
  private readonly inFlight = new Map<string, AbortController>();
  private readonly slots: PollingSlots;
  private unsubscribeCreated: (() => void) | null = null;

  constructor(private readonly options: TaskWorkerOptions) {
    this.now = options.now ?? (() => new Date());
    this.random = options.random ?? Math.random;
    this.log = options.log ?? silentLog;
    this.slots = new PollingSlots({
      concurrency: options.concurrency,
      pollMs: options.pollMs,
      runOnce: () => this.runOnce(),
      onError: (error) => this.log.error({ err: error }, 'worker loop error'),
    });
  }

  start(): void {
    this.unsubscribeCreated = this.options.events?.onCreated(() => this.slots.poke()) ?? null;
    this.slots.start();
  }

  /**
   * Stops claiming, lets running tasks finish for up to graceMs, then aborts the rest and puts
   * them back in the queue for another worker.
   */
  async stop(graceMs: number): Promise<void> {
    this.unsubscribeCreated?.();
    const allDone = this.slots.stop();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace_over'>((resolve) => {
      timer = setTimeout(() => resolve('grace_over'), graceMs);
    });
    if ((await Promise.race([allDone, graceOver])) === 'grace_over') {
      for (const controller of this.inFlight.values()) controller.abort(new AttemptAborted('shutdown'));
      await allDone;
    }
    clearTimeout(timer);
  }

  /** Claims and runs at most one task; false when there was nothing to do. */
  async runOnce(): Promise<boolean> {
    const { store } = this.options;
    const task = await store.claimNextTask({
      now: this.now(),
      leaseMs: this.options.leaseMs,
      maxAttempts: this.options.maxAttempts,
      deadlineMs: this.options.deadlineMs,
    });
    if (!task) return false;
    await this.runTask(task);
    return true;
  }

  private async runTask(task: TaskRecord): Promise<void> {
    const { store, events } = this.options;
    const controller = new AbortController();
    this.inFlight.set(task.id, controller);
    const abort = (reason: AbortReason) => {
      if (!controller.signal.aborted) controller.abort(new AttemptAborted(reason));
    };

    // A cancel in this process is heard at once; one elsewhere shows up at the next heartbeat.
    const unsubscribe = events?.onChanged(task.id, () => abort('ownership_lost'));
    const heartbeat = setInterval(
      () => {
        store.renewLease(task.id, task.attempt, this.now(), this.options.leaseMs).then(
          (owned) => owned || abort('ownership_lost'),
          (error: unknown) => this.log.warn({ err: error, task_id: task.id }, 'lease renewal failed'),
        );
      },
      Math.max(10, Math.floor(this.options.leaseMs / 3)),
    );
    const timeout = setTimeout(() => abort('timeout'), this.options.generationTimeoutMs);

    try {
      const media = await this.generateAndStore(task, controller.signal);
      const completed = await store.completeTask({ taskId: task.id, attempt: task.attempt, media, now: this.now() });
      if (!completed) {
        // Fenced out: a cancel or a newer attempt decided; this attempt's images belong to no one.
        await Promise.all(media.map((m) => this.options.blobs.delete(m.blobKey)));
        this.log.info({ task_id: task.id, attempt: task.attempt }, 'late result discarded');
      }
    } catch (error) {
      await this.handleFailure(task, controller.signal.aborted ? controller.signal.reason : error);
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timeout);
      unsubscribe?.();
      this.inFlight.delete(task.id);
      events?.taskChanged(task.id);
    }
  }

  private async generateAndStore(task: TaskRecord, signal: AbortSignal): Promise<GeneratedMediaInput[]> {
    const references = await this.loadReferences(task);
    signal.throwIfAborted();
    const images = await this.options.generator.generate(
      {
        model: task.model,
        prompt: task.prompt,
        aspectRatio: task.parameters.aspect_ratio,
        resolution: task.parameters.resolution,
        width: task.width,
        height: task.height,
        references,
      },
      signal,
    );
    const now = this.now();
    const media: GeneratedMediaInput[] = [];
    for (const image of images) {
      signal.throwIfAborted();
      const id = newIdAt(now);
      const blobKey = mediaBlobKey(id);
      // Reserved before it is written: if this process dies before completeTask, the sweeper
      // deletes the orphan once the grace period is over.
      await this.options.store.scheduleBlobDeletion(blobKey, new Date(now.getTime() + ORPHAN_BLOB_GRACE_MS));
      await this.options.blobs.put(blobKey, image.bytes);
      media.push({
        id,
        blobKey,
        contentType: image.contentType,
        width: image.width,
        height: image.height,
        sizeBytes: image.bytes.length,
        sha256: createHash('sha256').update(image.bytes).digest('hex'),
        expiresAt: new Date(now.getTime() + this.options.resultRetentionMs),
        resizedFrom: image.resizedFrom ?? null,
      });
    }
    return media;
  }

  private async loadReferences(task: TaskRecord): Promise<Buffer[]> {
    if (task.imageReference.length === 0) return [];
    const keys = await this.options.store.mediaBlobKeys(task.accountId, task.imageReference);
    return Promise.all(
      task.imageReference.map(async (mediaId) => {
        const key = keys.get(mediaId);
        const bytes = key ? await this.options.blobs.getBuffer(key) : null;
        if (!bytes)
          throw new GenerationError(
            'reference_unavailable',
            `Reference image ${mediaId} is no longer available.`,
            false,
          );
        return bytes;
      }),
    );
  }

  private async handleFailure(task: TaskRecord, error: unknown): Promise<void> {
    const { store } = this.options;
    const now = this.now();
    if (error instanceof AttemptAborted && error.reason === 'ownership_lost') return;
    if (error instanceof AttemptAborted && error.reason === 'shutdown') {
      await store.requeueTask({ taskId: task.id, attempt: task.attempt, runAfter: now, now });
      this.log.info({ task_id: task.id }, 'task released at shutdown');
      return;
    }

    const failure = describeFailure(error);
    if (failure.transient && task.attempt < this.options.maxAttempts) {
      const delay = generationRetryDelayMs(task.attempt, this.options.retryBaseMs, this.random, failure.retryAfterMs);
      await store.requeueTask({
        taskId: task.id,
        attempt: task.attempt,
        runAfter: new Date(now.getTime() + delay),
        now,
      });
      const { code, upstream } = failure;
      this.log.warn(
        { task_id: task.id, attempt: task.attempt, code, upstream, retry_in_ms: delay },
        'generation failed; will retry',
      );
      return;
    }
    await store.failTask({
      taskId: task.id,
      attempt: task.attempt,
      error: { code: failure.code, message: failure.message },
      now,
    });
    const logged = { task_id: task.id, attempt: task.attempt, code: failure.code, upstream: failure.upstream };
    this.log.warn({ ...logged, err: failure.internal ? error : undefined }, 'task failed');
  }
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
}

function describeFailure(error: unknown): FailureDescription {
  if (error instanceof GenerationError) {
    const { code, message, transient, retryAfterMs, upstream } = error;
    return { code, message, transient, internal: false, retryAfterMs, upstream };
  }
  if (error instanceof AttemptAborted) {
    return { code: 'generation_timeout', message: 'The generation took too long.', transient: true, internal: false };
  }
  return { code: 'internal_error', message: 'The generation failed on our side.', transient: true, internal: true };
}
