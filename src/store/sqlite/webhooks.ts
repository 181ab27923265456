import { MAX_LISTED_ATTEMPTS, type WebhookEventType } from '../../../schemas/webhooks.js';
import { manualReplayOf, replayWindowStart, type WebhookReplayBudget } from '../../core/webhook-replay-budget.js';
import { scheduledAttemptsAdded } from '../../core/webhook-retry-schedule.js';
import { notFound } from '../../core/errors.js';
import { newIdAt } from '../../ids.js';
import { newestFirstKeyset, pageFetchSize, pageOf } from '../paging.js';
import type {
  Page,
  WebhookAttemptOutcome,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookDeliveryWithAttempts,
  WebhookSecrets,
  WebhookStore,
} from '../port.js';
import { dateOrNull, msOrNull, toWebhookDelivery, type WebhookDeliveryRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { integerParameter, namedTextParameter } from './unplanned-parameters.js';
import { webhookSecretsOf } from '../webhook-secrets.js';

/** Webhook secrets, deliveries (the outbox) and their attempts on the embedded store. */
export class SqliteWebhooks implements WebhookStore {
  constructor(private readonly db: SqliteDatabase) {}

  async webhookSecrets(accountId: string, now: Date, newSecret: () => string): Promise<WebhookSecrets> {
    const existing = this.readWebhookSecrets(accountId, now);
    if (existing) return existing;
    return this.db.write(() => {
      // Two first calls may race; the unique index on the current secret lets one insert win.
      this.db
        .statement(
          'INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
        )
        .run(accountId, newSecret(), now.getTime());
      return this.readWebhookSecrets(accountId, now)!;
    });
  }

  async rotateWebhookSecret(
    accountId: string,
    now: Date,
    graceMs: number,
    newSecret: () => string,
  ): Promise<WebhookSecrets> {
    return this.db.write(() => {
      this.db.statement('DELETE FROM webhook_secrets WHERE account_id = ? AND retired_at IS NOT NULL').run(accountId);
      this.db
        .statement(
          'UPDATE webhook_secrets SET retired_at = ?, expires_at = ? WHERE account_id = ? AND retired_at IS NULL',
        )
        .run(now.getTime(), now.getTime() + graceMs, accountId);
      this.db
        .statement('INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES (?, ?, ?)')
        .run(accountId, newSecret(), now.getTime());
      return this.readWebhookSecrets(accountId, now)!;
    });
  }

  private readWebhookSecrets(accountId: string, now: Date): WebhookSecrets | null {
    const rows = this.db
      .statement(
        'SELECT secret, retired_at, expires_at FROM webhook_secrets WHERE account_id = ? AND (retired_at IS NULL OR expires_at > ?)',
      )
      .all(accountId, now.getTime()) as { secret: string; retired_at: number | null; expires_at: number | null }[];
    return webhookSecretsOf(
      rows.map((r) => ({ secret: r.secret, retiredAt: dateOrNull(r.retired_at), expiresAt: dateOrNull(r.expires_at) })),
    );
  }

  async claimDueWebhookDelivery(now: Date, leaseMs: number): Promise<WebhookDelivery | null> {
    const row = this.db.writeUnsynced(
      () =>
        this.db
          .statement(
            `UPDATE webhook_deliveries SET next_attempt_at = ?, updated_at = ?
             WHERE id = (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT 1)
             RETURNING *`,
          )
          .get(now.getTime() + leaseMs, now.getTime(), now.getTime()) as WebhookDeliveryRow | undefined,
    );
    return row ? toWebhookDelivery(row) : null;
  }

  async recordWebhookAttempt(input: WebhookAttemptOutcome): Promise<void> {
    const { attempt } = input;
    // Reported to the account (the delivery log), so synced; in the group commit, so that a
    // dispatcher in the API's process does not hold its event loop for a sync of its own.
    await this.db.groupCommit(
      () => {
        this.db
          .statement(
            'INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?)',
          )
          .run(input.deliveryId, attempt.attemptedAt.getTime(), attempt.statusCode, attempt.error, attempt.durationMs);
        // Only the most recent attempts are kept (the list's bound); the delivery counts them all.
        this.db
          .statement(
            `DELETE FROM webhook_attempts WHERE delivery_id = ? AND id <= (
               SELECT id FROM webhook_attempts WHERE delivery_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
          )
          .run(input.deliveryId, input.deliveryId, MAX_LISTED_ATTEMPTS);
        this.db
          .statement(
            `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, scheduled_attempts = scheduled_attempts + ?,
             manual_attempt = 0, resume_at = NULL, next_attempt_at = ?, last_status_code = ?, last_error = ?, updated_at = ?
           WHERE id = ?`,
          )
          .run(
            input.status,
            scheduledAttemptsAdded(input),
            msOrNull(input.nextAttemptAt),
            attempt.statusCode,
            attempt.error,
            input.now.getTime(),
            input.deliveryId,
          );
      },
      { durable: true },
    );
  }

  async listWebhookDeliveries(
    accountId: string,
    query: { limit: number; cursor?: string; taskId?: string; status?: WebhookDeliveryStatus },
  ): Promise<Page<WebhookDeliveryWithAttempts>> {
    const { conditions, params } = newestFirstKeyset(
      accountId,
      query.cursor,
      { task_id: query.taskId, status: query.status },
      {},
      namedTextParameter,
    );
    const rows = this.db
      .statement(
        `SELECT * FROM webhook_deliveries WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT ${integerParameter('@limit')}`,
      )
      .all({ ...params, limit: pageFetchSize(query.limit) }) as WebhookDeliveryRow[];
    const page = pageOf(rows, query.limit, (r) => r.id);
    return { items: page.items.map((r) => this.withAttempts(r)), nextCursor: page.nextCursor };
  }

  async replayWebhookDelivery(
    accountId: string,
    deliveryId: string,
    now: Date,
    budget: WebhookReplayBudget,
  ): Promise<WebhookDeliveryWithAttempts> {
    const row = this.db.write(() => {
      const current = this.db
        .statement(
          'SELECT status, next_attempt_at, manual_attempt FROM webhook_deliveries WHERE id = ? AND account_id = ?',
        )
        .get(deliveryId, accountId) as
        | { status: WebhookDeliveryStatus; next_attempt_at: number | null; manual_attempt: number }
        | undefined;
      if (!current) throw notFound('Webhook delivery');
      this.db
        .statement('DELETE FROM webhook_replays WHERE account_id = ? AND replayed_at <= ?')
        .run(accountId, replayWindowStart(now, budget).getTime());
      const replays = (column: 'delivery_id' | 'account_id', id: string) => {
        const r = this.db
          .statement(`SELECT count(*) AS n, min(replayed_at) AS oldest FROM webhook_replays WHERE ${column} = ?`)
          .get(id) as { n: number; oldest: number | null };
        return { count: r.n, oldestAt: dateOrNull(r.oldest) };
      };
      const replay = manualReplayOf({
        delivery: {
          status: current.status,
          nextAttemptAt: dateOrNull(current.next_attempt_at),
          manualRetryPending: current.manual_attempt === 1,
        },
        deliveryReplays: replays('delivery_id', deliveryId),
        accountReplays: replays('account_id', accountId),
        budget,
        now,
      });
      this.db
        .statement('INSERT INTO webhook_replays (delivery_id, account_id, replayed_at) VALUES (?, ?, ?)')
        .run(deliveryId, accountId, now.getTime());
      return this.db
        .statement(
          `UPDATE webhook_deliveries SET resume_at = ?, manual_attempt = 1, status = ?, next_attempt_at = ?, updated_at = ?
           WHERE id = ? RETURNING *`,
        )
        .get(
          msOrNull(replay.resumeAt),
          replay.status,
          replay.nextAttemptAt.getTime(),
          now.getTime(),
          deliveryId,
        ) as WebhookDeliveryRow;
    });
    return this.withAttempts(row);
  }

  private withAttempts(row: WebhookDeliveryRow): WebhookDeliveryWithAttempts {
    const attempts = this.db
      .statement(
        'SELECT attempted_at, status_code, error, duration_ms FROM webhook_attempts WHERE delivery_id = ? ORDER BY id',
      )
      .all(row.id) as { attempted_at: number; status_code: number | null; error: string | null; duration_ms: number }[];
    return {
      ...toWebhookDelivery(row),
      attemptLog: attempts.map((a) => ({
        attemptedAt: new Date(a.attempted_at),
        statusCode: a.status_code,
        error: a.error,
        durationMs: a.duration_ms,
      })),
    };
  }
}

/** Queues a task's event for delivery (the outbox), in the caller's transaction. */
export function enqueueWebhookEvent(
  db: SqliteDatabase,
  event: { accountId: string; taskId: string; type: WebhookEventType; url: string; now: Date },
): void {
  const at = event.now.getTime();
  db.statement(
    `INSERT INTO webhook_deliveries (id, account_id, task_id, event_type, url, status, next_attempt_at, event_at, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)`,
  ).run(newIdAt(event.now), event.accountId, event.taskId, event.type, event.url, at, at, at, at);
}
