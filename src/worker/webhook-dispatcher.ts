import { afterWebhookAttempt } from '../core/webhook-retry-schedule.js';
import { toTaskResource, type MediaUrlSigner } from '../presenters/resources.js';
import type { Store, WebhookDelivery } from '../store/port.js';
import { generateWebhookSecret, sendWebhook } from '../webhooks/send-webhook.js';
import type { LookupAll } from '../webhooks/ssrf-guard.js';
import { PollingSlots } from './polling-slots.js';
import type { WorkerLog } from './worker-log.js';

export interface WebhookDispatcherOptions {
  store: Pick<Store, 'webhooks' | 'tasks'>;
  signer: MediaUrlSigner;
  allowPrivate: boolean;
  lookup?: LookupAll;
  timeoutMs: number;
  /** Multiplies the retry schedule; 1 in production, tiny in tests. */
  retryScale: number;
  /** A claimed delivery is this process's for this long; after a crash it is sent again. */
  leaseMs: number;
  pollMs: number;
  concurrency: number;
  now?: () => Date;
  random?: () => number;
  log?: WorkerLog;
}

/**
 * Sends the outbox: claims due deliveries, signs and posts each event, records every attempt and
 * schedules the next one (docs/design.md §3.6). Every attempt of a delivery carries the same webhook-id.
 */
export class WebhookDispatcher {
  private readonly now: () => Date;
  private readonly random: () => number;
  private readonly slots: PollingSlots;

  constructor(private readonly options: WebhookDispatcherOptions) {
    this.now = options.now ?? (() => new Date());
    this.random = options.random ?? Math.random;
    this.slots = new PollingSlots({
      concurrency: options.concurrency,
      pollMs: options.pollMs,
      runOnce: () => this.runOnce(),
      onError: (error) => this.options.log?.error({ err: error }, 'webhook dispatch error'),
    });
  }

  start(): void {
    this.slots.start();
  }

  /** Wakes idle slots, e.g. right after a task reached a terminal state in this process. */
  poke(): void {
    this.slots.poke();
  }

  stop(): Promise<void> {
    return this.slots.stop();
  }

  /** Sends at most one due delivery; false when none was due. */
  async runOnce(): Promise<boolean> {
    const delivery = await this.options.store.webhooks.claimDueWebhookDelivery(this.now(), this.options.leaseMs);
    if (!delivery) return false;
    await this.deliver(delivery);
    return true;
  }

  private async deliver(delivery: WebhookDelivery): Promise<void> {
    const { store } = this.options;
    const task = await store.tasks.getTaskById(delivery.taskId);
    const attemptedAt = this.now();
    const secrets = await store.webhooks.webhookSecrets(delivery.accountId, attemptedAt, generateWebhookSecret);
    const body = JSON.stringify({
      type: delivery.eventType,
      timestamp: delivery.eventAt.toISOString(),
      data: task ? toTaskResource(task, this.options.signer, attemptedAt) : null,
    });
    const result = await sendWebhook({
      url: delivery.url,
      webhookId: delivery.id,
      timestamp: attemptedAt,
      body,
      secrets: [secrets.current, ...(secrets.previous ? [secrets.previous] : [])],
      allowPrivate: this.options.allowPrivate,
      timeoutMs: this.options.timeoutMs,
      lookup: this.options.lookup,
    });

    const finishedAt = this.now();
    const { status, nextAttemptAt } = afterWebhookAttempt({
      delivered: result.ok,
      stop: result.stop,
      delivery,
      now: finishedAt,
      random: this.random,
      scale: this.options.retryScale,
    });
    await store.webhooks.recordWebhookAttempt({
      deliveryId: delivery.id,
      attempt: {
        attemptedAt,
        statusCode: result.statusCode,
        error: result.error ?? (result.ok ? null : `HTTP ${result.statusCode}`),
        durationMs: Math.round(result.durationMs),
      },
      status,
      nextAttemptAt,
      manual: delivery.manualRetry !== null,
      now: finishedAt,
    });
    this.options.log?.info(
      { delivery_id: delivery.id, task_id: delivery.taskId, status_code: result.statusCode, outcome: status },
      'webhook attempt',
    );
  }
}
