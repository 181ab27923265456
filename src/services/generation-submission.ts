import { randomInt } from 'node:crypto';
import type { GenerationRequest } from '../../schemas/catalog.js';
import { SEED_MAX } from '../../schemas/model-entry.js';
import { DomainError, RetryLaterError } from '../core/errors.js';
import { priceRequest, type PricedRequest } from '../core/pricing.js';
import type { ResolutionCheck } from '../core/size-plan.js';
import { assertReferencesUsable } from '../core/task-admission.js';
import { seedAt } from '../core/seed.js';
import { assertModelAllowed } from '../core/key-scope.js';
import { createTask, imageReferencesOf, type TaskRecord } from '../core/task.js';
import { newIdAt } from '../ids.js';
import type { Store, StoredResponse, TaskCreationLimits } from '../store/port.js';
import { assertWebhookUrlAllowed, WebhookUrlRejectedError, type WebhookUrlPolicy } from '../webhooks/ssrf-guard.js';
import type { HeldIdempotencyKey, IdempotencyService } from './idempotency.js';
import type { TaskEvents } from './task-events.js';

export interface GenerationSubmissionOptions {
  store: Pick<Store, 'tasks' | 'media'>;
  idempotency: IdempotencyService;
  /** Removes an upload of the account (an edit's images, when its create is refused). */
  deleteUpload: (accountId: string, mediaId: string) => Promise<void>;
  events: TaskEvents;
  now: () => Date;
  maxActiveTasks: number;
  webhookPolicy: WebhookUrlPolicy;
  /**
   * Milliseconds until the model's backend may be tried again when it is known unavailable (its
   * circuit is open), else null; unset = never.
   */
  backendUnavailableFor?: (model: string, now: Date) => Promise<number | null>;
  /** Whether the model's backend makes a cell without enlarging it past MAX_UPSCALE; unset = always. */
  resolutionCheck?: ResolutionCheck;
  log: { warn(details: object, message: string): void };
  /** Draws the seed of a request that names none (0 to SEED_MAX); unset = crypto's randomInt. */
  drawSeed?: () => number;
}

/** What a face knows of a request beyond its native body. */
export interface TaskOrigin {
  /**
   * The end user of the account's product the task is for (OpenAI's \`user\`), at most
   * END_USER_ID_MAX_LENGTH characters: stored on the task and hashed into the providers' safety identifier.
   */
  endUserId?: string;
}

/** One create, as a face read it from its request. */
export interface GenerationOrder {
  accountId: string;
  /** The native request; an edit's image references are added by `storeReferences`. */
  request: GenerationRequest;
  /** The API key it came with: its scope is checked at admission (core admitTasks), and the tasks count against it. */
  key?: TaskCreationLimits['key'];
  /** How many tasks of it (OpenAI's `n`): admitted and charged together, all or none. Default 1. */
  count?: number;
  origin?: TaskOrigin;
  /** The Idempotency-Key and the fingerprint of the request it came with. */
  idempotency?: { key: string; fingerprint: string } | null;
  /**
   * An edit's images: each stores one as an upload of the account and returns its media id. They
   * are stored once the key is held, in order, and become the tasks' image references; a refused
   * create deletes them again.
   */
  referenceUploads?: readonly (() => Promise<string>)[];
  /**
   * The face's answer a retry with the same key replays, shaped from the tasks about to be
   * admitted; stored in the charge's own transaction. Called only when a key is held.
   */
  answerOf: (tasks: readonly TaskRecord[]) => StoredResponse;
}

export type Submitted =
  /** The tasks were admitted and charged; `response` is the answer kept under the key, if one was sent. */
  | { replayed: false; tasks: TaskRecord[]; response: StoredResponse | null }
  /** A retry of a create that was admitted before: its answer, charged nothing again. */
  | { replayed: true; response: StoredResponse };

/** A create refused because the model's backend is known unavailable (503 with its wait; nothing charged). */
export class BackendUnavailableError extends RetryLaterError {
  constructor(message: string, retryAfterSeconds: number) {
    super('unavailable', message, retryAfterSeconds);
  }
}

/**
 * The one create of every face (the native route, the OpenAI face, the MCP tool): the
 * Idempotency-Key claimed, or its first answer replayed; the request checked and priced; its
 * tasks admitted and charged in one transaction that also completes the key with the face's
 * answer, so that a crash right after the charge cannot let a retry charge again; the key's lease
 * renewed while this works and released when it is refused. The estimate applies the same checks
 * and charges nothing. Faces differ only in how they read the request and shape the answer.
 */
export class GenerationSubmission {
  constructor(private readonly options: GenerationSubmissionOptions) {}

  async submit(order: GenerationOrder): Promise<Submitted> {
    const { idempotency } = this.options;
    let held: HeldIdempotencyKey | null = null;
    if (order.idempotency) {
      const claim = await idempotency.claim(order.accountId, order.idempotency.key, order.idempotency.fingerprint);
      if (claim.outcome === 'replay') return { replayed: true, response: claim.response };
      held = claim.held;
    }
    // Renewed while this works: an edit's images are decoded and stored before the charge, which
    // may outlast the key's lease.
    const lease = held ? idempotency.keepAlive(held, this.leaseWarning) : null;
    const references: string[] = [];
    try {
      for (const upload of order.referenceUploads ?? []) references.push(await upload());
      const request = order.referenceUploads ? { ...order.request, image_reference: references } : order.request;
      const tasks = await this.prepare(order.accountId, request, order.count ?? 1, order.origin ?? {}, order.key?.id);
      const response = held ? order.answerOf(tasks) : null;
      const completesKey = held && response ? { ...held, response } : undefined;
      const admission = { maxActiveTasks: this.options.maxActiveTasks, ...(order.key && { key: order.key }) };
      if (tasks.length === 1) await this.options.store.tasks.insertTaskWithDebit(tasks[0], admission, completesKey);
      else await this.options.store.tasks.insertTasksWithDebits(tasks, admission, completesKey);
      for (const task of tasks) this.options.events.taskCreated(task.model);
      return { replayed: false, tasks, response };
    } catch (error) {
      // Nothing was charged: the images go, and the key is free for a retry at once.
      await Promise.all(references.map((id) => this.discardUpload(order.accountId, id)));
      if (held) await idempotency.release(held).catch((err: unknown) => this.leaseWarning(err));
      throw error;
    } finally {
      lease?.stop();
    }
  }

  /**
   * Prices the request after the checks a create would make of it first, so that an estimate
   * promises nothing a create then refuses: the webhook URL, and each image reference must be an
   * unexpired upload of the account (core assertReferencesUsable, the rule a create's admission applies),
   * and the key's models (core assertModelAllowed, admission's too).
   */
  async estimate(
    accountId: string,
    request: GenerationRequest,
    key?: TaskCreationLimits['key'],
  ): Promise<PricedRequest> {
    if (key) assertModelAllowed(key.scope, request.model);
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

  /** The tasks a request asks for, priced and with their ids, not yet stored (the store checks the references). */
  private async prepare(
    accountId: string,
    request: GenerationRequest,
    count: number,
    origin: TaskOrigin,
    keyId: string | undefined,
  ): Promise<TaskRecord[]> {
    const now = this.options.now();
    // The URL is stored (and later sent to) as read: its normalised href.
    const webhookUrl =
      request.webhook_url === undefined ? undefined : await this.assertWebhookUrlAllowed(request.webhook_url);
    const asked = webhookUrl === undefined ? request : { ...request, webhook_url: webhookUrl };
    const context = {
      accountId,
      now,
      newId: () => newIdAt(now),
      ...(origin.endUserId === undefined ? {} : { endUserId: origin.endUserId }),
      ...(keyId === undefined ? {} : { keyId }),
    };
    // Every task records its seed, so that its result can be made again; the i-th of several is seed + i.
    const seed = request.parameters?.seed ?? this.drawSeed();
    const tasks: TaskRecord[] = [];
    for (let i = 0; i < count; i++) tasks.push(createTask(asked, { ...context, seed: seedAt(seed, i) }));
    this.assertResolutionServed(request.model, tasks[0]);
    await this.assertBackendAvailable(request.model, now);
    return tasks;
  }

  private drawSeed(): number {
    return this.options.drawSeed ? this.options.drawSeed() : randomInt(SEED_MAX + 1);
  }

  private readonly leaseWarning = (err: unknown) =>
    this.options.log.warn({ err }, 'could not renew or release an idempotency key');

  private async discardUpload(accountId: string, mediaId: string): Promise<void> {
    try {
      await this.options.deleteUpload(accountId, mediaId);
    } catch (err) {
      // The upload stays until its retention ends; the sweeper removes it then.
      this.options.log.warn({ err, mediaId }, 'could not delete the images of a refused create');
    }
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
