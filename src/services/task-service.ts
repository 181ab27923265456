import type { GenerationRequest } from '../../schemas/catalog.js';
import { DomainError, notFound } from '../core/errors.js';
import { priceRequest, type PricedRequest } from '../core/pricing.js';
import type { ResolutionCheck } from '../core/size-plan.js';
import { assertReferencesUsable } from '../core/task-admission.js';
import { createTask, imageReferencesOf, isTerminal, type TaskRecord } from '../core/task.js';
import { assertWebhookUrlAllowed, WebhookUrlRejectedError, type WebhookUrlPolicy } from '../webhooks/ssrf-guard.js';
import { taskStepOf } from '../core/task-stream.js';
import type { TaskEvents } from './task-events.js';
import { newIdAt } from '../ids.js';
import type { Page, Store, StoredResponse, TaskListQuery } from '../store/port.js';
import type { HeldIdempotencyKey } from './idempotency.js';
import { WaitTimers } from './wait-timers.js';
import { TaskChangePoll, type PolledWait } from './task-change-poll.js';

export interface TaskServiceOptions {
  store: Pick<Store, 'tasks' | 'media'>;
  events: TaskEvents;
  now: () => Date;
  maxActiveTasks: number;
  /** How often the waited tasks' states are read, for changes made by other processes. */
  crossProcessPollMs: number;
  webhookPolicy: WebhookUrlPolicy;
  /**
   * Milliseconds until the model's backend may be tried again when it is known unavailable (its
   * circuit is open), else null; unset = never.
   */
  backendUnavailableFor?: (model: string, now: Date) => Promise<number | null>;
  /** Whether the model's backend makes a cell without enlarging it past MAX_UPSCALE; unset = always. */
  resolutionCheck?: ResolutionCheck;
}

/** What a face knows of a request beyond its native body. */
export interface TaskOrigin {
  /**
   * The end user of the account's product the task is for (OpenAI's \`user\`), at most
   * END_USER_ID_MAX_LENGTH characters: stored on the task and hashed into the providers' safety identifier.
   */
  endUserId?: string;
}

/** A create refused because the model's backend is known unavailable (503; the route sets Retry-After). */
export class BackendUnavailableError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super('unavailable', message);
  }
}

/** Task use cases: the steps around the pure core that need the store and the clock. */
export class TaskService {
  /**
   * The waits' deadlines on one timer, at most 10 ms (and a twentieth of the poll interval) late.
   * Fine slots on purpose: the waits whose deadline falls in one slot read their tasks in the same
   * turn, and 5 000 of them in 100 slots are 50 reads a turn, not the 250 of 50 ms slots, which
   * would hold a completion's wake-ups back.
   */
  private readonly waitTimers: WaitTimers;
  /** Changes to waited tasks that no signal of this process carries, found once per interval for all waits. */
  private readonly changePoll: TaskChangePoll;
  /** Aborted by drain(): waits end with the task as it is, and new ones do not wait. */
  private readonly draining = new AbortController();

  constructor(private readonly options: TaskServiceOptions) {
    this.waitTimers = new WaitTimers(
      Math.max(1, Math.min(10, Math.floor(options.crossProcessPollMs / 20))),
      options.crossProcessPollMs,
    );
    this.changePoll = new TaskChangePoll((ids) => options.store.tasks.getTaskStates(ids), options.crossProcessPollMs);
  }

  /** Requests waiting for a task to change now: long-polls, event streams between events, tool calls. */
  get waitsHeld(): number {
    return this.changePoll.size;
  }

  /**
   * The process is shutting down (docs/design.md §4, drain): every wait held now is answered with
   * its task as it is (a long-poll gets the task's state, not a reset connection), and a wait asked
   * for from now on answers at once.
   */
  drain(): void {
    this.draining.abort();
    this.changePoll.wakeAll();
  }

  /** drain() was called: a caller that waits in a loop stops looping. */
  get isDraining(): boolean {
    return this.draining.signal.aborted;
  }

  /**
   * Prices the request after the checks a create would make of it first, so that an estimate
   * promises nothing a create then refuses: the webhook URL, and each image reference must be an
   * unexpired upload of the account (core assertReferencesUsable, the rule a create's admission applies).
   */
  async estimate(accountId: string, request: GenerationRequest): Promise<PricedRequest> {
    const priced = priceRequest(request.model, request.parameters);
    this.assertResolutionServed(request.model, priced);
    if (request.webhook_url !== undefined) await this.assertWebhookUrlAllowed(request.webhook_url);
    const now = this.options.now();
    const references = imageReferencesOf(request);
    const found = await Promise.all(references.map((id) => this.options.store.media.getMedia(accountId, id, now)));
    assertReferencesUsable(
      references,
      found.filter((media) => media !== null),
      now,
    );
    return priced;
  }

  /**
   * The task a request asks for, priced and with its id, not yet stored: its 202 can be written
   * before it is charged, so that an Idempotency-Key is completed with that answer in the charge's
   * transaction (see create).
   */
  async prepare(accountId: string, request: GenerationRequest, origin: TaskOrigin = {}): Promise<TaskRecord> {
    const now = this.options.now();
    // The URL is stored (and later sent to) as read: its normalised href.
    const webhookUrl =
      request.webhook_url === undefined ? undefined : await this.assertWebhookUrlAllowed(request.webhook_url);
    const task = createTask(webhookUrl === undefined ? request : { ...request, webhook_url: webhookUrl }, {
      accountId,
      now,
      newId: () => newIdAt(now),
      ...(origin.endUserId === undefined ? {} : { endUserId: origin.endUserId }),
    });
    this.assertResolutionServed(request.model, task);
    await this.assertBackendAvailable(request.model, now);
    return task;
  }

  /**
   * Stores and charges a prepared task; the store checks its image references in the same
   * transaction. With an Idempotency-Key held for the request, the key is completed with its
   * response in that transaction too, so that a crash right after the charge cannot let a retry
   * charge again.
   */
  async create(task: TaskRecord, completesKey?: HeldIdempotencyKey & { response: StoredResponse }): Promise<void> {
    await this.options.store.tasks.insertTaskWithDebit(
      task,
      { maxActiveTasks: this.options.maxActiveTasks },
      completesKey,
    );
    this.options.events.taskCreated(task.model);
  }

  /**
   * create for the tasks of one request (an OpenAI `n` > 1): all stored and charged in one
   * transaction, or none.
   */
  async createMany(
    tasks: readonly TaskRecord[],
    completesKey?: HeldIdempotencyKey & { response: StoredResponse },
  ): Promise<void> {
    await this.options.store.tasks.insertTasksWithDebits(
      tasks,
      { maxActiveTasks: this.options.maxActiveTasks },
      completesKey,
    );
    for (const task of tasks) this.options.events.taskCreated(task.model);
  }

  async cancel(accountId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.cancelTask(accountId, taskId, this.options.now());
    this.options.events.taskChanged(taskId);
    return task;
  }

  /**
   * The task once it is terminal, or as it is after waitMs. Wakes on this process's change events;
   * a change made by another process is seen at the change poll's next round (crossProcessPollMs).
   */
  async waitForTerminal(accountId: string, taskId: string, waitMs: number, signal: AbortSignal): Promise<TaskRecord> {
    return this.waitUntil(
      () => this.get(accountId, taskId),
      (task) => isTerminal(task.status),
      taskId,
      waitMs,
      signal,
    );
  }

  /**
   * The task once it has moved past `afterStep` (taskStepOf: a change an event stream has not sent
   * yet), or as it is after waitMs. The same signals as the long-poll wake it. With `owner` null
   * the task is read by id alone: the caller proved access with a signed stream URL.
   */
  async waitForNextStep(
    owner: string | null,
    taskId: string,
    afterStep: number,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<TaskRecord> {
    return this.waitUntil(
      () => (owner === null ? this.getBySignedUrl(taskId) : this.get(owner, taskId)),
      (task) => taskStepOf(task) > afterStep,
      taskId,
      waitMs,
      signal,
    );
  }

  private waitUntil(
    read: () => Promise<TaskRecord>,
    settled: (task: TaskRecord) => boolean,
    taskId: string,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<TaskRecord> {
    // A read that does not wait (the hot GET) subscribes to nothing; nor does any once draining.
    if (waitMs <= 0 || this.draining.signal.aborted) return read();
    return new TaskWait(read, settled, waitMs, signal, {
      draining: this.draining.signal,
      events: this.options.events,
      timers: this.waitTimers,
      changes: this.changePoll,
      taskId,
    }).result;
  }

  async get(accountId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.getTask(accountId, taskId);
    if (!task) throw notFound('Task');
    return task;
  }

  /** A task of any account, by id alone: for a request that proved access with a signed URL. */
  async getBySignedUrl(taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.getTaskById(taskId);
    if (!task) throw notFound('Task');
    return task;
  }

  list(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    return this.options.store.tasks.listTasks(accountId, query);
  }

  /** A backend known unavailable takes no work: 503 with Retry-After, nothing charged. */
  private async assertBackendAvailable(model: string, now: Date): Promise<void> {
    const waitMs = await this.options.backendUnavailableFor?.(model, now);
    if (waitMs === null || waitMs === undefined) return;
    throw new BackendUnavailableError(
      `The backend serving ${model} is unavailable; no task is accepted for it until it is back.`,
      Math.max(1, Math.ceil(waitMs / 1000)),
    );
  }

  /**
   * A cell the configured backend would make only by enlarging a smaller image past MAX_UPSCALE is
   * refused before any charge (the price is per resolution; docs/design.md §3.2).
   */
  private assertResolutionServed(
    model: string,
    priced: { parameters: { aspect_ratio: string; resolution: string }; width: number; height: number },
  ): void {
    const check = this.options.resolutionCheck?.(model, {
      aspectRatio: priced.parameters.aspect_ratio,
      resolution: priced.parameters.resolution,
      width: priced.width,
      height: priced.height,
    });
    if (!check || check.allowed) return;
    const { resolution } = priced.parameters;
    const detail = `${model} makes ${check.native.width}x${check.native.height} here; ${resolution} (${priced.width}x${priced.height}) would enlarge it ${check.factor.toFixed(2)}x, more than this service allows. Choose a lower resolution.`;
    throw new DomainError('resolution_unavailable', detail, [
      { pointer: '/parameters/resolution', location: 'body', code: 'resolution_unavailable', detail },
    ]);
  }

  /** The URL's normalised href, or the 400 (pointer /webhook_url) that refuses it. */
  private async assertWebhookUrlAllowed(url: string): Promise<string> {
    try {
      return (await assertWebhookUrlAllowed(url, this.options.webhookPolicy)).href;
    } catch (error) {
      if (!(error instanceof WebhookUrlRejectedError)) throw error;
      throw new DomainError('invalid_request', error.message, [
        { pointer: '/webhook_url', location: 'body', code: `webhook_${error.reason}`, detail: error.message },
      ]);
    }
  }
}

/**
 * One waiting request (a long-poll, or an event stream between two events): the task read now,
 * then again on each of this process's change signals for it, when the change poll finds it moved
 * since this wait's last read (changes made by other processes), and when the client leaves, until
 * it is settled or the wait is over.
 *
 * Built to allocate once per wait, not per wake-up: one promise, one function the signal, the
 * timer wheel and the abort all call, subscriptions kept for the whole wait. Each wake-up makes
 * only its read, which is dropped unless it ends the wait. 5 000 waiters that each kept a record, a
 * promise and a few closures from one fallback re-read to the next made V8 copy and promote about
 * 10 MiB a second out of the young generation: scavenges of 20–75 ms, and the wake-ups of the
 * completions behind them (BENCHMARKS.md, "Long-poll wake-ups and the young generation").
 */
class TaskWait implements PolledWait {
  private readonly outcome = Promise.withResolvers<TaskRecord>();
  readonly result = this.outcome.promise;
  readonly taskId: string;
  seenStep: number | null = null;
  private readonly deadline: number;
  readonly wake = () => this.readAgain();
  /** The timer wheel's call: the deadline, or (the wheel's horizon being shorter) a re-arm. */
  private readonly tick = () => {
    this.timerSlot = -1;
    if (this.deadline - Date.now() <= 0) this.readAgain();
    else this.arm();
  };
  private readonly unsubscribe: () => void;
  /** The timer wheel's slot of the deadline's timer; -1 while none is armed. */
  private timerSlot = -1;
  private reading = false;
  private wokenWhileReading = false;
  private ended = false;

  constructor(
    private readonly read: () => Promise<TaskRecord>,
    private readonly settled: (task: TaskRecord) => boolean,
    waitMs: number,
    private readonly signal: AbortSignal,
    private readonly context: {
      /** The service's drain: the next read ends the wait. */
      draining: AbortSignal;
      events: TaskEvents;
      timers: WaitTimers;
      changes: TaskChangePoll;
      taskId: string;
    },
  ) {
    this.taskId = context.taskId;
    this.deadline = Date.now() + waitMs;
    // Subscribed before the first read: a change committed while it runs wakes a second one.
    this.unsubscribe = context.events.onChanged(context.taskId, this.wake);
    signal.addEventListener('abort', this.wake, { once: true });
    context.changes.add(this);
    this.readAgain();
  }

  private readAgain(): void {
    if (this.ended) return;
    if (this.reading) {
      this.wokenWhileReading = true;
      return;
    }
    this.reading = true;
    this.read().then(
      (task) => {
        this.reading = false;
        this.seenStep = taskStepOf(task);
        if (
          this.settled(task) ||
          this.signal.aborted ||
          this.context.draining.aborted ||
          this.deadline - Date.now() <= 0
        ) {
          this.end();
          this.outcome.resolve(task);
        } else if (this.wokenWhileReading) {
          this.wokenWhileReading = false;
          this.readAgain();
        } else if (this.timerSlot < 0) {
          this.arm();
        }
      },
      (error: unknown) => {
        this.reading = false;
        this.end();
        this.outcome.reject(error);
      },
    );
  }

  private arm(): void {
    this.timerSlot = this.context.timers.after(this.deadline - Date.now(), this.tick);
  }

  private end(): void {
    this.ended = true;
    if (this.timerSlot >= 0) this.context.timers.cancel(this.timerSlot, this.tick);
    this.timerSlot = -1;
    this.unsubscribe();
    this.context.changes.delete(this);
    this.signal.removeEventListener('abort', this.wake);
  }
}
