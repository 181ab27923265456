import { createHash, createHmac } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { BlobStore } from '../blobs/port.js';
import {
  callsAllowed,
  type BackendLimitSettings,
  type UpstreamOutcome,
  type UpstreamOutcomeKind,
} from '../core/backend-capacity.js';
import { afterFailedAttempt, generationRetryDelayMs } from '../core/task-retry.js';
import type { TaskRecord } from '../core/task.js';
import {
  type GeneratedImage,
  GenerationError,
  type GenerationInput,
  type ImageGenerator,
  type UpstreamUsage,
} from '../generators/port.js';
import { newIdAt } from '../ids.js';
import { mediaBlobKey, ORPHAN_BLOB_GRACE_MS } from '../services/media-service.js';
import { dependencyFailureOf } from '../services/dependency-failure.js';
import type { TaskEvents } from '../services/task-events.js';
import type { GeneratedMediaInput, Store } from '../store/port.js';
import { loadTaskReferences } from './task-references.js';

/**
 * One model backend as a worker process runs it: the models it serves, its generator, how many of
 * its tasks this process runs at once, and for a remote backend the limit shared by the cluster.
 */
export interface WorkerBackend {
  /** `local`, `gemini`, `openai`: the label of its metrics and logs. */
  name: string;
  /** The models whose tasks it runs; absent = every model (a single-backend worker). */
  models?: readonly string[];
  generator: ImageGenerator;
  /**
   * Its tasks this process runs at once: the cores for the CPU-bound local renderer; for a remote
   * backend only a ceiling, since the shared limit decides (docs/design.md §4.2).
   */
  slots: number;
  /** A remote backend's adaptive limit on calls in flight, kept in the store for every process. */
  sharedLimit?: BackendLimitSettings;
}

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

export interface WorkerLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** What a worker reports to Prometheus (worker-metrics.ts); absent in tests that do not look. */
export interface WorkerMetrics {
  upstreamCall(backend: string, outcome: UpstreamOutcomeKind, durationMs: number): void;
  /** Tokens a provider reported for a call, per backend and catalog model (cost reconciliation). */
  upstreamUsage?(backend: string, model: string, usage: UpstreamUsage): void;
  tasksInProgress(backend: string, count: number): void;
}

/** Why an attempt was aborted; decides what happens to the task afterwards. */
type AbortReason = 'shutdown' | 'ownership_lost' | 'timeout';

class AttemptAborted extends Error {
  constructor(readonly reason: AbortReason) {
    super(`attempt aborted: ${reason}`);
  }
}

const silentLog: WorkerLog = { info() {}, warn() {}, error() {} };

/** A backend and this process's running count and known pause. */
class BackendLane {
  running = 0;
  /** The shared limit as last seen, to log its changes. */
  lastLimit: number | null = null;
  /** Epoch ms before which no call is started (the provider asked us to wait). */
  pausedUntil = 0;
  constructor(readonly backend: WorkerBackend) {}

  hasRoom(now: number): boolean {
    return this.freeSlots(now) > 0;
  }

  /** Tasks this process may claim for the backend right now. */
  freeSlots(now: number): number {
    return now >= this.pausedUntil ? Math.max(0, this.backend.slots - this.running) : 0;
  }
}

/**
 * Claims taken at once for a backend with free slots and no shared limit. One claim at a time
 * capped a PostgreSQL worker at one claim's round trip per task whatever its slots (232 / 279 / 293
 * no-op tasks/s at 1 / 2 / 4 slots, docs/performance-history.md); concurrent claims are separate short
 * transactions that SKIP LOCKED past each other. A shared limit claims one at a time: its claims
 * queue on the limit's row anyway.
 */
const CONCURRENT_CLAIMS = 8;

/**
 * Claims tasks from the store and runs them: claim → generate → store images → finish, with a
 * heartbeat renewing the lease meanwhile. A task is claimed only when its backend has room for
 * one more call (docs/design.md §4.2): a claimed task never waits for a slot, so its lease,
 * deadline and place in the queue stay honest. One dispatch loop claims for every backend; the
 * tasks run concurrently.
 */
export class TaskWorker {
  private readonly now: () => Date;
  private readonly random: () => number;
  private readonly log: WorkerLog;
  private readonly inFlight = new Map<string, AbortController>();
  private readonly running = new Set<Promise<void>>();
  private readonly lanes: BackendLane[];
  private unsubscribeCreated: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;
  private poked = false;
  private nextDeadlineSweep = 0;

  constructor(private readonly options: TaskWorkerOptions) {
    this.now = options.now ?? (() => new Date());
    this.random = options.random ?? Math.random;
    this.log = options.log ?? silentLog;
    this.lanes = options.backends.map((backend) => new BackendLane(backend));
  }

  start(): void {
    this.unsubscribeCreated = this.options.events?.onCreated(() => this.poke()) ?? null;
    this.loop = this.dispatch();
  }

  /** Looks for work at once (a task was created, or a slot came free). */
  poke(): void {
    // Remembered when the loop is not asleep (it is claiming): the next sleep returns at once, so
    // a slot freed during a claim that found the limit full is not left idle for a poll interval.
    this.poked = true;
    this.wake?.();
  }

  /**
   * Stops claiming, lets running tasks finish for up to graceMs, then aborts the rest and puts
   * them back in the queue for another worker.
   */
  async stop(graceMs: number): Promise<void> {
    this.unsubscribeCreated?.();
    this.stopping = true;
    this.poke();
    await this.loop;
    const allDone = Promise.all([...this.running]).then(() => undefined);
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

  /** Claims and runs at most one task, to its end; false when there was nothing to do. */
  async runOnce(): Promise<boolean> {
    for (const lane of this.lanes) {
      if (!lane.hasRoom(this.now().getTime())) continue;
      const task = await this.claim(lane);
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

  private async dispatch(): Promise<void> {
    while (!this.stopping) {
      let started = false;
      this.poked = false;
      try {
        await this.sweepDeadlines();
        const claimed = await Promise.all(this.lanes.map((lane) => this.fill(lane)));
        started = claimed.some(Boolean);
      } catch (error) {
        this.log.error({ err: error }, 'worker loop error');
      }
      if (!started && !this.stopping) await this.sleep();
    }
  }

  /** Claims for the lane's free slots until they are full or the queue has nothing for it. */
  private async fill(lane: BackendLane): Promise<boolean> {
    let started = false;
    while (!this.stopping) {
      const room = Math.min(lane.freeSlots(this.now().getTime()), lane.backend.sharedLimit ? 1 : CONCURRENT_CLAIMS);
      if (room === 0) break;
      // Settled, not all: a task one claim took must run even when another claim failed.
      const results = await Promise.allSettled(Array.from({ length: room }, () => this.claim(lane)));
      const claimed = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
      for (const task of claimed) this.launch(lane, task);
      if (claimed.length > 0) started = true;
      const failure = results.find((r) => r.status === 'rejected');
      if (failure) throw failure.reason;
      if (claimed.length < room) break;
    }
    return started;
  }

  private launch(lane: BackendLane, task: TaskRecord): void {
    lane.running += 1;
    this.options.metrics?.tasksInProgress(lane.backend.name, lane.running);
    const run = this.runTask(lane, task)
      .catch((error: unknown) => this.log.error({ err: error, task_id: task.id }, 'task run error'))
      .finally(() => {
        lane.running -= 1;
        this.options.metrics?.tasksInProgress(lane.backend.name, lane.running);
        this.running.delete(run);
        this.poke();
      });
    this.running.add(run);
  }

  /** Sleeps until poked, the poll interval, or the end of the earliest pause, whichever is first. */
  private sleep(): Promise<void> {
    if (this.poked) return Promise.resolve();
    const now = this.now().getTime();
    const pauseEnds = this.lanes
      .filter((lane) => lane.running < lane.backend.slots && lane.pausedUntil > now)
      .map((lane) => lane.pausedUntil - now);
    const ms = Math.min(this.options.pollMs, ...pauseEnds);
    return new Promise((resolve) => {
      const timer = setTimeout(done, Math.max(1, ms));
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }

  private claim(lane: BackendLane): Promise<TaskRecord | null> {
    const { backend } = lane;
    return this.options.store.tasks.claimNextTask({
      now: this.now(),
      leaseMs: this.options.leaseMs,
      maxAttempts: this.options.maxAttempts,
      deadlineMs: this.options.deadlineMs,
      models: backend.models,
      sharedLimit: backend.sharedLimit ? { backend: backend.name, settings: backend.sharedLimit } : undefined,
    });
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

  private async runTask(lane: BackendLane, task: TaskRecord): Promise<void> {
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
        store.tasks.renewLease(task.id, task.attempt, this.now(), this.options.leaseMs).then(
          (owned) => owned || abort('ownership_lost'),
          (error: unknown) => this.log.warn({ err: error, task_id: task.id }, 'lease renewal failed'),
        );
      },
      Math.max(10, Math.floor(this.options.leaseMs / 3)),
    );
    const timeout = setTimeout(() => abort('timeout'), this.options.generationTimeoutMs);

    try {
      const images = await this.generate(lane, task, controller.signal);
      // The generation is done and paid for: storing it waits out a storage outage up to the
      // task's deadline instead of the generation's timeout.
      clearTimeout(timeout);
      const media = describeImages(images, this.now(), this.options.resultRetentionMs);
      const completed = await this.whileDependencyAway(task, controller.signal, 'storing the result', () =>
        this.storeAndComplete(task, images, media),
      );
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

  /**
   * Calls the backend's generator and records what the call came to: in the metrics, and in the
   * backend's shared limit (before the task leaves IN_PROGRESS, so the call still counts in flight).
   */
  private async callGenerator(lane: BackendLane, task: TaskRecord, input: GenerationInput, signal: AbortSignal) {
    const started = performance.now();
    let outcome: UpstreamOutcome;
    try {
      const images = await lane.backend.generator.generate(input, signal);
      outcome = { kind: 'ok', durationMs: performance.now() - started };
      for (const { usage } of images)
        if (usage) this.options.metrics?.upstreamUsage?.(lane.backend.name, task.model, usage);
      return images;
    } catch (error) {
      outcome = outcomeOf(error);
      throw error;
    } finally {
      // An abort (cancel, shutdown, timeout) is ours, not the provider's answer.
      if (!signal.aborted || outcome!.kind !== 'transient') await this.recordCall(lane, task, outcome!, started);
    }
  }

  private async recordCall(
    lane: BackendLane,
    task: TaskRecord,
    outcome: UpstreamOutcome,
    startedAt: number,
  ): Promise<void> {
    const { backend } = lane;
    this.options.metrics?.upstreamCall(backend.name, outcome.kind, performance.now() - startedAt);
    if (!backend.sharedLimit) return;
    try {
      const before = lane.pausedUntil;
      const state = await this.options.store.backendLimits.recordUpstreamCall({
        backend: backend.name,
        task: { id: task.id, attempt: task.attempt },
        models: backend.models ?? [],
        outcome,
        now: this.now(),
        settings: backend.sharedLimit,
      });
      lane.pausedUntil = state.pausedUntil ?? 0;
      // The call's slot is free for the cluster now, while this task stores its result.
      this.poke();
      const limit = callsAllowed(state);
      if (limit !== lane.lastLimit) {
        this.log.info(
          { backend: backend.name, limit, was: lane.lastLimit, outcome: outcome.kind },
          'backend limit changed',
        );
        lane.lastLimit = limit;
      }
      if (lane.pausedUntil > before && lane.pausedUntil > this.now().getTime())
        this.log.info({ backend: backend.name, paused_ms: lane.pausedUntil - this.now().getTime() }, 'backend paused');
    } catch (error) {
      // The limit is bookkeeping: a store that cannot take it now must not fail the task.
      this.log.warn({ err: error, backend: backend.name }, 'could not record the upstream call');
    }
  }

  private async generate(lane: BackendLane, task: TaskRecord, signal: AbortSignal): Promise<GeneratedImage[]> {
    const references = await loadTaskReferences(
      { store: this.options.store.media, blobs: this.options.blobs },
      task,
      lane.backend.generator,
      signal,
    );
    signal.throwIfAborted();
    return this.callGenerator(
      lane,
      task,
      {
        model: task.model,
        prompt: task.prompt,
        aspectRatio: task.parameters.aspect_ratio,
        resolution: task.parameters.resolution,
        outputFormat: task.parameters.output_format,
        outputCompression: task.parameters.output_compression,
        width: task.width,
        height: task.height,
        references,
        safetyIdentifier: this.options.safetyIdentifierKey
          ? safetyIdentifier(this.options.safetyIdentifierKey, task.accountId, task.endUserId)
          : undefined,
      },
      signal,
    );
  }

  /** Stores the images under their media's keys and completes the task: false when fenced out. */
  private async storeAndComplete(
    task: TaskRecord,
    images: readonly GeneratedImage[],
    media: readonly GeneratedMediaInput[],
  ): Promise<boolean> {
    const { store, blobs } = this.options;
    for (const [index, image] of images.entries()) {
      const { blobKey } = media[index]!;
      // Reserved before it is written (again on a retry, from now): if this process dies before
      // completeTask, the sweeper deletes the orphan once the grace period is over.
      await store.media.scheduleBlobDeletion(blobKey, new Date(this.now().getTime() + ORPHAN_BLOB_GRACE_MS));
      await blobs.put(blobKey, image.bytes);
    }
    if (await store.tasks.completeTask({ taskId: task.id, attempt: task.attempt, media: [...media], now: this.now() }))
      return true;
    // A completion retried after its answer was lost may have committed the first time: then the
    // task holds these media, and they must not be deleted as a late result's.
    const current = await store.tasks.getTaskById(task.id);
    return current?.status === 'COMPLETED' && current.generated.some((item) => item.media_id === media[0]?.id);
  }

  /**
   * Runs op again while it fails because a dependency is away, with the retry backoff, for as long
   * as the task's deadline allows: a storage blip does not throw away an image already generated
   * (and paid for), and spends none of the task's attempts. Past the deadline, or on any other
   * error, op's error is thrown.
   */
  private async whileDependencyAway<T>(
    task: TaskRecord,
    signal: AbortSignal,
    what: string,
    op: () => Promise<T>,
  ): Promise<T> {
    for (let retries = 1; ; retries++) {
      try {
        return await op();
      } catch (error) {
        const wait = generationRetryDelayMs(retries, this.options.retryBaseMs, this.random);
        // Up to the deadline itself, and once more at it: a task given up any earlier would only
        // be generated again (and paid for again) after its deferral.
        const untilDeadline = task.createdAt.getTime() + this.options.deadlineMs - this.now().getTime();
        if (!dependencyFailureOf(error) || untilDeadline <= 0) throw error;
        const waitMs = Math.min(wait, untilDeadline);
        this.log.warn(
          { err: error, task_id: task.id, retry_in_ms: waitMs },
          `${what}: a dependency is unavailable; retrying`,
        );
        await delay(waitMs, undefined, { signal });
      }
    }
  }

  /** Back to the queue after delayMs without spending one of the task's attempts; returns delayMs. */
  private async defer(task: TaskRecord, delayMs: number): Promise<number> {
    const now = this.now();
    await this.options.store.tasks.requeueTask({
      taskId: task.id,
      attempt: task.attempt,
      runAfter: new Date(now.getTime() + delayMs),
      now,
      deferred: true,
    });
    return delayMs;
  }

  private async handleFailure(task: TaskRecord, error: unknown): Promise<void> {
    const { store } = this.options;
    const now = this.now();
    if (error instanceof AttemptAborted && error.reason === 'ownership_lost') return;
    if (error instanceof AttemptAborted && error.reason === 'shutdown') {
      await store.tasks.requeueTask({ taskId: task.id, attempt: task.attempt, runAfter: now, now });
      this.log.info({ task_id: task.id }, 'task released at shutdown');
      return;
    }

    // null: a dependency of ours was away, which is not the task's failure.
    const failure = dependencyFailureOf(error) ? null : describeFailure(error);
    const next = afterFailedAttempt(task, failure ? { kind: 'generation', ...failure } : { kind: 'dependency' }, {
      now,
      deadlineMs: this.options.deadlineMs,
      maxAttempts: this.options.maxAttempts,
      retryBaseMs: this.options.retryBaseMs,
      random: this.random,
    });
    const logged = {
      task_id: task.id,
      attempt: task.attempt,
      code: failure?.code,
      upstream: failure?.upstream,
    };
    if (next.action === 'defer') {
      await this.defer(task, next.delayMs);
      if (!failure)
        this.log.warn(
          { err: error, task_id: task.id, retry_in_ms: next.delayMs },
          'a dependency is unavailable; task deferred',
        );
      else
        this.log.info(
          { ...logged, retry_in_ms: next.delayMs },
          'provider at capacity; task deferred without spending an attempt',
        );
      return;
    }
    if (next.action === 'retry') {
      await store.tasks.requeueTask({
        taskId: task.id,
        attempt: task.attempt,
        runAfter: new Date(now.getTime() + next.delayMs),
        now,
      });
      this.log.warn({ ...logged, retry_in_ms: next.delayMs }, 'generation failed; will retry');
      return;
    }
    await store.tasks.failTask({ taskId: task.id, attempt: task.attempt, error: next.error, now });
    if (!failure)
      this.log.warn({ err: error, task_id: task.id, code: next.error.code }, 'task failed: a dependency was away');
    else if (next.waitPastDeadline)
      this.log.warn(
        { ...logged, retry_after_ms: failure.retryAfterMs },
        'task failed: the provider asks for a wait past its deadline',
      );
    else this.log.warn({ ...logged, err: failure.internal ? error : undefined }, 'task failed');
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
  /** The provider refused the call for capacity: not the task's failure. */
  capacity?: boolean;
  /** At most this many attempts end in this failure (GenerationError.maxAttempts). */
  maxAttempts?: number;
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

/** The media rows of a generation's images: ids and keys chosen once, so a retried store writes the same. */
function describeImages(images: readonly GeneratedImage[], now: Date, retentionMs: number): GeneratedMediaInput[] {
  return images.map((image) => {
    const id = newIdAt(now);
    return {
      id,
      blobKey: mediaBlobKey(id),
      contentType: image.contentType,
      width: image.width,
      height: image.height,
      sizeBytes: image.bytes.length,
      sha256: createHash('sha256').update(image.bytes).digest('hex'),
      expiresAt: new Date(now.getTime() + retentionMs),
      resizedFrom: image.resizedFrom ?? null,
    };
  });
}

/**
 * The account as the provider sees it: HMAC-SHA256 of its id under the deployment's key, so one
 * abusive account can be told apart without giving the provider our ids (stable across calls).
 * With an end user (the OpenAI face's `user`), the hash is of the account and that user, so the
 * provider can tell one abusive user of an account's product from its other users; an account's
 * tasks without one keep the account's own identifier. The JSON array keeps the two apart
 * whatever characters the end-user id holds.
 */
export function safetyIdentifier(key: string, accountId: string, endUserId: string | null = null): string {
  const subject = endUserId === null ? accountId : JSON.stringify([accountId, endUserId]);
  return createHmac('sha256', key).update(`safety-identifier:${subject}`).digest('hex').slice(0, 32);
}

/** Failures that say the backend cannot serve anyone for now (decision 0011). */
const BACKEND_UNAVAILABLE_CODES = new Set(['generator_unavailable', 'upstream_quota_exhausted']);

/** What a failed generator call means for the backend's limit and metrics. */
function outcomeOf(error: unknown): UpstreamOutcome {
  if (error instanceof GenerationError) {
    if (error.capacity) return { kind: 'rate_limited', retryAfterMs: error.retryAfterMs };
    // Our key, billing or an exhausted quota: the backend's circuit opens (no calls, creates refused).
    if (BACKEND_UNAVAILABLE_CODES.has(error.code)) return { kind: 'unavailable', retryAfterMs: error.retryAfterMs };
    return { kind: error.transient ? 'transient' : 'permanent' };
  }
  return { kind: 'transient' };
}
