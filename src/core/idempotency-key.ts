/**
 * The Idempotency-Key rules as the stores apply them: what a request that presents a
 * key gets, from the row stored under it. The stores read and lock the row, and write what this says.
 */

/** The row stored under an account's key, as the decision needs it. */
export interface StoredIdempotencyKey {
  fingerprint: string;
  status: 'in_flight' | 'completed';
  /** Until when the request holding an in-flight key is presumed alive. */
  leaseExpiresAt: Date | null;
  /** When the key is forgotten: an expired row counts as absent even before it is swept. */
  expiresAt: Date;
}

/**
 * - `start`: no live row; the key starts a new life with this request (insert, or overwrite the
 *   expired row).
 * - `fingerprint_mismatch`: the key was first used with another request.
 * - `replay`: the first request completed; its stored response is the answer.
 * - `in_progress`: the first request still holds the key.
 * - `take_over`: the holder's lease ran out (its process died, most likely): this request takes
 *   the key over, and the old holder's token can no longer complete or release it. The key's
 *   expiry stays where its first use put it.
 */
export type IdempotencyKeyDecision = 'start' | 'fingerprint_mismatch' | 'replay' | 'in_progress' | 'take_over';

export function idempotencyKeyDecision(
  stored: StoredIdempotencyKey | null,
  fingerprint: string,
  now: Date,
): IdempotencyKeyDecision {
  if (!stored || stored.expiresAt.getTime() <= now.getTime()) return 'start';
  if (stored.fingerprint !== fingerprint) return 'fingerprint_mismatch';
  if (stored.status === 'completed') return 'replay';
  if ((stored.leaseExpiresAt?.getTime() ?? 0) > now.getTime()) return 'in_progress';
  return 'take_over';
}
