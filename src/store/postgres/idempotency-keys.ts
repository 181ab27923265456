import { idempotencyKeyDecision, type StoredIdempotencyKey } from '../../core/idempotency-key.js';
import type {
  IdempotencyClaim,
  IdempotencyClaimRequest,
  IdempotencyCompletion,
  IdempotencyKeyHold,
  IdempotencyStore,
  StoredResponse,
} from '../port.js';
import type { PostgresDatabase, Tx } from './postgres-database.js';

/** Idempotency keys on PostgreSQL: claims are unsynced bookkeeping, completions synced. */
export class PostgresIdempotencyKeys implements IdempotencyStore {
  constructor(private readonly db: PostgresDatabase) {}

  async claimIdempotencyKey(input: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const now = input.now.getTime();
    const leaseExpiresAt = new Date(now + input.leaseMs);
    // The row a new or expired key starts with ($1 to $7 of both inserts below).
    const newRow = [
      input.accountId,
      input.key,
      input.fingerprint,
      input.leaseToken,
      leaseExpiresAt,
      input.now,
      new Date(now + input.ttlMs),
    ];
    return this.db.transaction(
      async (tx): Promise<IdempotencyClaim> => {
        const inserted = await tx.query(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
         VALUES ($1, $2, $3, 'in_flight', $4, $5, $6, $7) ON CONFLICT (account_id, key) DO NOTHING`,
          newRow,
        );
        if (inserted.rowCount === 1) return { outcome: 'acquired' };
        const { rows } = await tx.query<IdempotencyKeyRow>(
          `SELECT fingerprint, status, lease_expires_at, expires_at, response_status, response_headers, response_body
         FROM idempotency_keys WHERE account_id = $1 AND key = $2 FOR UPDATE`,
          [input.accountId, input.key],
        );
        const row = rows[0];
        const decision = idempotencyKeyDecision(row ? storedKey(row) : null, input.fingerprint, input.now);
        if (decision === 'fingerprint_mismatch' || decision === 'in_progress') return { outcome: decision };
        if (decision === 'replay') return { outcome: 'replay', response: storedResponse(row) };
        if (decision === 'take_over') {
          await tx.query(
            'UPDATE idempotency_keys SET lease_token = $3, lease_expires_at = $4 WHERE account_id = $1 AND key = $2',
            [input.accountId, input.key, input.leaseToken, leaseExpiresAt],
          );
          return { outcome: 'acquired' };
        }
        // Expired (or swept between the two statements): the key starts a new life.
        await tx.query(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
         VALUES ($1, $2, $3, 'in_flight', $4, $5, $6, $7)
         ON CONFLICT (account_id, key) DO UPDATE SET
           fingerprint = excluded.fingerprint, status = 'in_flight', lease_token = excluded.lease_token,
           lease_expires_at = excluded.lease_expires_at, response_status = NULL, response_headers = NULL,
           response_body = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at`,
          newRow,
        );
        return { outcome: 'acquired' };
      },
      { unsynced: true },
    );
  }

  async completeIdempotencyKey(input: IdempotencyCompletion): Promise<boolean> {
    return this.db.transaction((tx) => completeIdempotencyKeyIn(tx, input));
  }

  async renewIdempotencyKey(input: IdempotencyKeyHold & { leaseExpiresAt: Date }): Promise<boolean> {
    const result = await this.db.query(
      "UPDATE idempotency_keys SET lease_expires_at = $1 WHERE account_id = $2 AND key = $3 AND status = 'in_flight' AND lease_token = $4",
      [input.leaseExpiresAt, input.accountId, input.key, input.leaseToken],
    );
    return result.rowCount === 1;
  }

  async releaseIdempotencyKey(input: IdempotencyKeyHold): Promise<void> {
    await this.db.query(
      "DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_flight' AND lease_token = $3",
      [input.accountId, input.key, input.leaseToken],
    );
  }

  async deleteExpiredIdempotencyKeys(now: Date, limit: number): Promise<number> {
    const result = await this.db.query(
      `DELETE FROM idempotency_keys WHERE (account_id, key) IN
         (SELECT account_id, key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [now, limit],
    );
    return result.rowCount ?? 0;
  }
}

/**
 * Whether the request still holds the key's lease, read in the caller's transaction (an admission's
 * fact). The row lock makes a take-over wait for the caller's commit, and then see the key completed.
 */
export async function lockIdempotencyKeyHeldIn(tx: Tx, hold: IdempotencyKeyHold): Promise<boolean> {
  const { rowCount } = await tx.query(
    "SELECT 1 FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_flight' AND lease_token = $3 FOR UPDATE",
    [hold.accountId, hold.key, hold.leaseToken],
  );
  return (rowCount ?? 0) > 0;
}

/** Stores the response under the held key in the caller's transaction; false when the lease was lost. */
export async function completeIdempotencyKeyIn(tx: Tx, input: IdempotencyCompletion): Promise<boolean> {
  const result = await tx.query(
    `UPDATE idempotency_keys SET status = 'completed', lease_token = NULL, lease_expires_at = NULL,
       response_status = $1, response_headers = $2, response_body = $3
     WHERE account_id = $4 AND key = $5 AND status = 'in_flight' AND lease_token = $6`,
    [
      input.response.statusCode,
      JSON.stringify(input.response.headers),
      input.response.body,
      input.accountId,
      input.key,
      input.leaseToken,
    ],
  );
  return (result.rowCount ?? 0) > 0;
}

interface IdempotencyKeyRow {
  fingerprint: string;
  status: 'in_flight' | 'completed';
  lease_expires_at: Date | null;
  expires_at: Date;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Buffer | null;
}

function storedKey(row: IdempotencyKeyRow): StoredIdempotencyKey {
  return {
    fingerprint: row.fingerprint,
    status: row.status,
    leaseExpiresAt: row.lease_expires_at,
    expiresAt: row.expires_at,
  };
}

function storedResponse(row: IdempotencyKeyRow): StoredResponse {
  return {
    statusCode: row.response_status!,
    headers: row.response_headers ?? {},
    body: row.response_body ?? Buffer.alloc(0),
  };
}
