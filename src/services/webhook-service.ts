import type { WebhookReplayBudget } from '../core/webhook-replay-budget.js';
import type { Page, Store, WebhookDeliveryWithAttempts, WebhookSecrets, WebhookStore } from '../store/port.js';
import { generateWebhookSecret } from '../webhooks/send-webhook.js';

/** Which deliveries a page lists: by task, by status, or all. */
export type WebhookDeliveryListQuery = Parameters<WebhookStore['listWebhookDeliveries']>[1];

/** How long a rotated-out secret still signs deliveries, so receivers can switch without a gap. */
export const WEBHOOK_SECRET_ROTATION_GRACE_MS = 24 * 3600_000;

export interface WebhookServiceOptions {
  store: Pick<Store, 'webhooks'>;
  now: () => Date;
  /** Wakes this process's dispatcher after a replay; absent in an API-only process. */
  onDeliveryQueued?: () => void;
  replayBudget: WebhookReplayBudget;
}

/** An account's webhook signing secret and its delivery log, with manual replays. */
export class WebhookService {
  constructor(private readonly options: WebhookServiceOptions) {}

  /** The account's signing secret, made on first read. */
  secrets(accountId: string): Promise<WebhookSecrets> {
    return this.options.store.webhooks.webhookSecrets(accountId, this.options.now(), generateWebhookSecret);
  }

  /** A new signing secret; the old one keeps signing for WEBHOOK_SECRET_ROTATION_GRACE_MS. */
  rotateSecret(accountId: string): Promise<WebhookSecrets> {
    return this.options.store.webhooks.rotateWebhookSecret(
      accountId,
      this.options.now(),
      WEBHOOK_SECRET_ROTATION_GRACE_MS,
      generateWebhookSecret,
    );
  }

  deliveries(accountId: string, query: WebhookDeliveryListQuery): Promise<Page<WebhookDeliveryWithAttempts>> {
    return this.options.store.webhooks.listWebhookDeliveries(accountId, query);
  }

  /**
   * Queues the delivery for an attempt now, within the replay budget (WebhookReplayRefused
   * otherwise), and wakes this process's dispatcher.
   */
  async replay(accountId: string, deliveryId: string): Promise<WebhookDeliveryWithAttempts> {
    const delivery = await this.options.store.webhooks.replayWebhookDelivery(
      accountId,
      deliveryId,
      this.options.now(),
      this.options.replayBudget,
    );
    this.options.onDeliveryQueued?.();
    return delivery;
  }
}
