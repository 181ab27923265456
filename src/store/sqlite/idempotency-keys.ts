import { idempotencyKeyDecision, type StoredIdempotencyKey } from '../../core/idempotency-key.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimRequest,
  IdempotencyCompletion,
  IdempotencyKeyHold,
  IdempotencyStore,
  StoredResponse,
} from '../port.js';
import { dateOrNull } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';

/** Idempotency keys on the embedded store: claims and their bookkeeping are unsynced, completions synced. */
export class SqliteIdempotencyKeys implements IdempotencyStore {
  constructor(private readonly db: SqliteDatabase) {}

  async claimIdempotencyKey(input: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const now = input.now.getTime();
    return this.db.groupCommit(
      (): IdempotencyClaim => {
        const row = this.db
          .statement('SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?')
          .get(input.accountId, input.key) as IdempotencyKeyRow | undefined;
        const decision = idempotencyKeyDecision(row ? storedKey(row) : null, input.fingerprint, input.now);
        if (decision === 'fingerprint_mismatch' || decision === 'in_progress') return { outcome: decision };
        if (decision === 'replay') return { outcome: 'replay', response: storedResponse(row!) };
        if (decision === 'take_over') {
          this.db
            .statement(
              'UPDATE idempotency_keys SET lease_token = ?, lease_expires_at = ? WHERE account_id = ? AND key = ?',
            )
            .run(input.leaseToken, now + input.leaseMs, input.accountId, input.key);
          return { outcome: 'acquired' };
        }
        this.db
          .statement(
            `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
           VALUES (@accountId, @key, @fingerprint, 'in_flight', @leaseToken, @leaseExpiresAt, @now, @expiresAt)
           ON CONFLICT (account_id, key) DO UPDATE SET
             fingerprint = excluded.fingerprint, status = 'in_flight', lease_token = excluded.lease_token,
             lease_expires_at = excluded.lease_expires_at, response_status = NULL, response_headers = NULL,
             response_body = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at`,
          )
          .run({
            accountId: input.accountId,
            key: input.key,
            fingerprint: input.fingerprint,
            leaseToken: input.leaseToken,
            leaseExpiresAt: now + input.leaseMs,
            now,
            expiresAt: now + input.ttlMs,
          });
        return { outcome: 'acquired' };
      },
      { durable: false },
    );
  }

  async completeIdempotencyKey(input: IdempotencyCompletion): Promise<boolean> {
    // A replay answers from it, so synced; in the turn's batch rather than as an autocommit of its
    // own, which held the event loop for a sync after every idempotent upload.
    return this.db.groupCommit(() => completeIdempotencyKeyIn(this.db, input), { durable: true });
  }

  async renewIdempotencyKey(input: IdempotencyKeyHold & { leaseExpiresAt: Date }): Promise<boolean> {
    // Bookkeeping, unsynced: after a crash the lease runs out sooner, which is what a crash should do.
    return this.db.groupCommit(
      () =>
        this.db
          .statement(
            "UPDATE idempotency_keys SET lease_expires_at = ? WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?",
          )
          .run(input.leaseExpiresAt.getTime(), input.accountId, input.key, input.leaseToken).changes === 1,
      { durable: false },
    );
  }

  async releaseIdempotencyKey(input: IdempotencyKeyHold): Promise<void> {
    // Bookkeeping like the claim it undoes, so unsynced and in the group commit. On its own it was
    // an autocommit under synchronous = FULL: one fsync on the event loop for every refused
    // idempotent create (a 402, a 429), however many arrived at once.
    await this.db.groupCommit(
      () => {
        this.db
          .statement(
            "DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?",
          )
          .run(input.accountId, input.key, input.leaseToken);
      },
      { durable: false },
    );
  }

  async deleteExpiredIdempotencyKeys(now: Date, limit: number): Promise<number> {
    // Bookkeeping (an expired key is already treated as absent), so unsynced, in the turn's batch.
    return this.db.groupCommit(
      () =>
        this.db
          .statement(
            'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)',
          )
          .run(now.getTime(), limit).changes,
      { durable: false },
    );
  }
}

/** Whether the request still holds the key's lease, read in the caller's transaction (an admission's fact). */
export function idempotencyKeyHeldIn(db: SqliteDatabase, hold: IdempotencyKeyHold): boolean {
  return (
    db
      .statement(
        "SELECT 1 FROM idempotency_keys WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?",
      )
      .get(hold.accountId, hold.key, hold.leaseToken) !== undefined
  );
}

/** Stores the response under the held key in the caller's transaction; false when the lease was lost. */
export function completeIdempotencyKeyIn(db: SqliteDatabase, input: IdempotencyCompletion): boolean {
  const result = db
    .statement(
      `UPDATE idempotency_keys
       SET status = 'completed', lease_token = NULL, lease_expires_at = NULL,
           response_status = ?, response_headers = ?, response_body = ?
       WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?`,
    )
    .run(
      input.response.statusCode,
      JSON.stringify(input.response.headers),
      input.response.body,
      input.accountId,
      input.key,
      input.leaseToken,
    );
  return result.changes > 0;
}

interface IdempotencyKeyRow {
  account_id: string;
  key: string;
  fingerprint: string;
  status: 'in_flight' | 'completed';
  lease_token: string | null;
  lease_expires_at: number | null;
  response_status: number | null;
  response_headers: string | null;
  response_body: Buffer | null;
  created_at: number;
  expires_at: number;
}

function storedKey(row: IdempotencyKeyRow): StoredIdempotencyKey {
  return {
    fingerprint: row.fingerprint,
    status: row.status,
    leaseExpiresAt: dateOrNull(row.lease_expires_at),
    expiresAt: new Date(row.expires_at),
  };
}

function storedResponse(row: IdempotencyKeyRow): StoredResponse {
  return {
    statusCode: row.response_status!,
    headers: JSON.parse(row.response_headers ?? '{}') as Record<string, string>,
    body: row.response_body ?? Buffer.alloc(0),
  };
}
