import { MAX_LISTED_ATTEMPTS } from '../../../schemas/webhooks.js';
import { manualReplayOf, replayWindowStart, type WebhookReplayBudget } from '../../core/webhook-replay-budget.js';
import { scheduledAttemptsAdded } from '../../core/webhook-retry-schedule.js';
import { notFound } from '../../core/errors.js';
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
import { numbered, type PostgresDatabase, type Queryable } from './postgres-database.js';
import { toWebhookDelivery, type WebhookDeliveryRow } from './rows.js';
import { webhookSecretsOf } from '../webhook-secrets.js';

/** Webhook secrets, deliveries (the outbox) and their attempts on PostgreSQL. */
export class PostgresWebhooks implements WebhookStore {
  constructor(private readonly db: PostgresDatabase) {}

  async webhookSecrets(accountId: string, now: Date, newSecret: () => string): Promise<WebhookSecrets> {
    const existing = await this.readWebhookSecrets(this.db, accountId, now);
    if (existing) return existing;
    // Two first calls may race; the unique index on the current secret lets one insert win.
    await this.db.query(
      `INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES ($1, $2, $3)
       ON CONFLICT (account_id) WHERE retired_at IS NULL DO NOTHING`,
      [accountId, newSecret(), now],
    );
    return (await this.readWebhookSecrets(this.db, accountId, now))!;
  }

  async rotateWebhookSecret(
    accountId: string,
    now: Date,
    graceMs: number,
    newSecret: () => string,
  ): Promise<WebhookSecrets> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
      await tx.query('DELETE FROM webhook_secrets WHERE account_id = $1 AND retired_at IS NOT NULL', [accountId]);
      await tx.query(
        'UPDATE webhook_secrets SET retired_at = $1, expires_at = $2 WHERE account_id = $3 AND retired_at IS NULL',
        [now, new Date(now.getTime() + graceMs), accountId],
      );
      await tx.query('INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES ($1, $2, $3)', [
        accountId,
        newSecret(),
        now,
      ]);
      return (await this.readWebhookSecrets(tx, accountId, now))!;
    });
  }

  private async readWebhookSecrets(db: Queryable, accountId: string, now: Date): Promise<WebhookSecrets | null> {
    const { rows } = await db.query<{ secret: string; retired_at: Date | null; expires_at: Date | null }>(
      'SELECT secret, retired_at, expires_at FROM webhook_secrets WHERE account_id = $1 AND (retired_at IS NULL OR expires_at > $2)',
      [accountId, now],
    );
    return webhookSecretsOf(rows.map((r) => ({ secret: r.secret, retiredAt: r.retired_at, expiresAt: r.expires_at })));
  }

  async claimDueWebhookDelivery(now: Date, leaseMs: number): Promise<WebhookDelivery | null> {
    const { rows } = await this.db.query<WebhookDeliveryRow>(
      `UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $2
       WHERE id = (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $2
                   ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [new Date(now.getTime() + leaseMs), now],
    );
    return rows[0] ? toWebhookDelivery(rows[0]) : null;
  }

  async recordWebhookAttempt(input: WebhookAttemptOutcome): Promise<void> {
    const { attempt } = input;
    await this.db.transaction(async (tx) => {
      await tx.query(
        'INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5)',
        [input.deliveryId, attempt.attemptedAt, attempt.statusCode, attempt.error, Math.round(attempt.durationMs)],
      );
      // Only the most recent attempts are kept (the list's bound); the delivery counts them all.
      await tx.query(
        `DELETE FROM webhook_attempts WHERE delivery_id = $1 AND id <= (
           SELECT id FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`,
        [input.deliveryId, MAX_LISTED_ATTEMPTS],
      );
      await tx.query(
        `UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, scheduled_attempts = scheduled_attempts + $7,
           manual_attempt = false, resume_at = NULL, next_attempt_at = $2, last_status_code = $3, last_error = $4,
           updated_at = $5 WHERE id = $6`,
        [
          input.status,
          input.nextAttemptAt,
          attempt.statusCode,
          attempt.error,
          input.now,
          input.deliveryId,
          scheduledAttemptsAdded(input),
        ],
      );
    });
  }

  async listWebhookDeliveries(
    accountId: string,
    query: { limit: number; cursor?: string; taskId?: string; status?: WebhookDeliveryStatus },
  ): Promise<Page<WebhookDeliveryWithAttempts>> {
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {
      task_id: query.taskId,
      status: query.status,
    });
    params.limit = pageFetchSize(query.limit);
    const { sql, values } = numbered(
      `SELECT * FROM webhook_deliveries WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`,
      params,
    );
    const { rows } = await this.db.query<WebhookDeliveryRow>(sql, values);
    const page = pageOf(rows, query.limit, (r) => r.id);
    return { items: await this.withAttempts(page.items), nextCursor: page.nextCursor };
  }

  async replayWebhookDelivery(
    accountId: string,
    deliveryId: string,
    now: Date,
    budget: WebhookReplayBudget,
  ): Promise<WebhookDeliveryWithAttempts> {
    const row = await this.db.transaction(async (tx) => {
      // The account's row lock orders its replays, so two at once cannot both take the last slot.
      await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
      const { rows: current } = await tx.query<{
        status: WebhookDeliveryStatus;
        next_attempt_at: Date | null;
        manual_attempt: boolean;
      }>(
        // Locked: the dispatcher's claim moves next_attempt_at, which the replay may keep as resume_at.
        'SELECT status, next_attempt_at, manual_attempt FROM webhook_deliveries WHERE id = $1 AND account_id = $2 FOR UPDATE',
        [deliveryId, accountId],
      );
      if (!current[0]) throw notFound('Webhook delivery');
      await tx.query('DELETE FROM webhook_replays WHERE account_id = $1 AND replayed_at <= $2', [
        accountId,
        replayWindowStart(now, budget),
      ]);
      const replays = async (column: 'delivery_id' | 'account_id', id: string) => {
        const { rows } = await tx.query<{ n: number; oldest: Date | null }>(
          `SELECT count(*)::int AS n, min(replayed_at) AS oldest FROM webhook_replays WHERE ${column} = $1`,
          [id],
        );
        return { count: rows[0].n, oldestAt: rows[0].oldest };
      };
      const replay = manualReplayOf({
        delivery: {
          status: current[0].status,
          nextAttemptAt: current[0].next_attempt_at,
          manualRetryPending: current[0].manual_attempt,
        },
        deliveryReplays: await replays('delivery_id', deliveryId),
        accountReplays: await replays('account_id', accountId),
        budget,
        now,
      });
      await tx.query('INSERT INTO webhook_replays (delivery_id, account_id, replayed_at) VALUES ($1, $2, $3)', [
        deliveryId,
        accountId,
        now,
      ]);
      const { rows } = await tx.query<WebhookDeliveryRow>(
        `UPDATE webhook_deliveries SET resume_at = $1, manual_attempt = true, status = $2, next_attempt_at = $3, updated_at = $4
         WHERE id = $5 RETURNING *`,
        [replay.resumeAt, replay.status, replay.nextAttemptAt, now, deliveryId],
      );
      return rows[0];
    });
    return (await this.withAttempts([row]))[0];
  }

  private async withAttempts(rows: WebhookDeliveryRow[]): Promise<WebhookDeliveryWithAttempts[]> {
    if (rows.length === 0) return [];
    type AttemptRow = {
      delivery_id: string;
      attempted_at: Date;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
    };
    const { rows: attempts } = await this.db.query<AttemptRow>(
      `SELECT delivery_id, attempted_at, status_code, error, duration_ms FROM webhook_attempts
       WHERE delivery_id = ANY($1::text[]) ORDER BY id`,
      [rows.map((r) => r.id)],
    );
    return rows.map((row) => ({
      ...toWebhookDelivery(row),
      attemptLog: attempts
        .filter((a) => a.delivery_id === row.id)
        .map((a) => ({
          attemptedAt: a.attempted_at,
          statusCode: a.status_code,
          error: a.error,
          durationMs: a.duration_ms,
        })),
    }));
  }
}

/**
 * The INSERT of a task's event into the outbox, one row for each row of `source` (a CTE of moved
 * tasks: id, account_id, webhook_url), due at once; the finish statement appends its condition.
 */
export function outboxRowOf(source: string, params: { id: string; eventType: string; at: string }): string {
  return `INSERT INTO webhook_deliveries (id, account_id, task_id, event_type, url, status, next_attempt_at, event_at, created_at, updated_at)
    SELECT ${params.id}, ${source}.account_id, ${source}.id, ${params.eventType}, ${source}.webhook_url, 'pending',
      ${params.at}, ${params.at}, ${params.at}, ${params.at}
    FROM ${source}`;
}
