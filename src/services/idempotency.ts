import { createHash, randomUUID } from 'node:crypto';
import { DomainError, RetryLaterError, type FieldError } from '../core/errors.js';
import type { IdempotencyClaim, IdempotencyStore, StoredResponse } from '../store/port.js';

/** An answer kept under a key for replays; the HTTP layer names it through this service. */
export type { StoredResponse };

/** docs/design.md §3.8: a key answers with its first response for 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * How long an in-flight request holds its key without renewing it before the key counts as
 * abandoned (a crashed process) and the next request with it may take over. The holder renews the
 * lease every IDEMPOTENCY_LEASE_RENEW_MS while it runs, so a slow request (a large upload) keeps its
 * key, and a retry after a crash is answered within seconds rather than after the longest request.
 */
export const IDEMPOTENCY_LEASE_MS = 5 * 1000;
export const IDEMPOTENCY_LEASE_RENEW_MS = Math.floor(IDEMPOTENCY_LEASE_MS / 3);
/** The first request finishes in milliseconds; a prompt retry will most likely be its replay. */
const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;
/**
 * A guard, not a limit a request should meet: renewal ends when the key is settled, and a request
 * is cut off by HTTP_REQUEST_TIMEOUT_MS long before this. Should a holder never settle its key,
 * the key is not held for ever.
 */
const MAX_RENEWED_HOLD_MS = 15 * 60 * 1000;

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
/** Visible ASCII and spaces: what a client can type, log and compare without surprises. */
export const IDEMPOTENCY_KEY_PATTERN = '^[\\x20-\\x7E]+$';
const KEY_REGEX = new RegExp(IDEMPOTENCY_KEY_PATTERN);

/** The problem of a malformed key, pointing at the header (the schema gives the same answer). */
export function assertValidIdempotencyKey(key: string): void {
  let fieldError: FieldError | null = null;
  const at = { pointer: '/idempotency-key', location: 'header' as const };
  if (key.length === 0) fieldError = { ...at, code: 'too_short', detail: 'Must be at least 1 character long.' };
  else if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH)
    fieldError = { ...at, code: 'too_long', detail: `Must be at most ${IDEMPOTENCY_KEY_MAX_LENGTH} characters long.` };
  else if (!KEY_REGEX.test(key)) fieldError = { ...at, code: 'invalid_format', detail: 'Must be printable ASCII.' };
  if (fieldError)
    throw new DomainError('invalid_request', `header /idempotency-key: ${fieldError.detail}`, [fieldError]);
}

/**
 * JSON with object keys sorted at every depth, so that two bodies that mean the same thing (keys
 * in another order, other whitespace) fingerprint the same. Array order is meaningful and kept.
 *
 * Written with an explicit stack, not recursion: a body is fingerprinted before its fields are
 * checked, and one nested thousands of levels deep (a few KiB, well within the body limit) would
 * otherwise overflow the call stack and end as a 500 instead of the field's 400.
 */
export function canonicalJson(root: unknown): string {
  let text = '';
  // What is left to write, last first: values still to serialize, and the punctuation between
  // them (a JsonText, so that it is not taken for a string value).
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (value instanceof JsonText) text += value.text;
    else if (value === undefined || value === null) text += 'null';
    else if (typeof value !== 'object') text += JSON.stringify(value);
    else if (Array.isArray(value)) {
      pending.push(CLOSE_ARRAY);
      for (let i = value.length - 1; i >= 0; i--) {
        pending.push(value[i]);
        if (i > 0) pending.push(COMMA);
      }
      text += '[';
    } else {
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record)
        .filter((key) => record[key] !== undefined)
        .sort();
      pending.push(CLOSE_OBJECT);
      for (let i = keys.length - 1; i >= 0; i--) {
        pending.push(record[keys[i]], new JsonText(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`));
      }
      text += '{';
    }
  }
  return text;
}

class JsonText {
  constructor(readonly text: string) {}
}
const COMMA = new JsonText(',');
const CLOSE_ARRAY = new JsonText(']');
const CLOSE_OBJECT = new JsonText('}');

/**
 * What a key is bound to: the method, the path and the body. Routes whose body is not JSON (a
 * multipart upload) pass their own body digest, e.g. the SHA-256 of the file they streamed.
 */
export function requestFingerprint(method: string, path: string, body: string | Buffer): string {
  return createHash('sha256')
    .update(method.toUpperCase())
    .update('\n')
    .update(path)
    .update('\n')
    .update(body)
    .digest('hex');
}

export function jsonRequestFingerprint(method: string, path: string, body: unknown): string {
  return requestFingerprint(method, path, canonicalJson(body));
}

export interface IdempotencyServiceOptions {
  store: IdempotencyStore;
  now: () => Date;
  ttlMs?: number;
  leaseMs?: number;
}

/** One key held by one request: created by `claim`, ended by `complete` or `release`. */
export interface HeldIdempotencyKey {
  accountId: string;
  key: string;
  leaseToken: string;
}

export type ClaimResult =
  | { outcome: 'acquired'; held: HeldIdempotencyKey }
  | { outcome: 'replay'; response: StoredResponse };

/** The Idempotency-Key protocol over the store, with the HTTP-free decisions made here. */
export class IdempotencyService {
  private readonly ttlMs: number;
  private readonly leaseMs: number;

  constructor(private readonly options: IdempotencyServiceOptions) {
    this.ttlMs = options.ttlMs ?? IDEMPOTENCY_TTL_MS;
    this.leaseMs = options.leaseMs ?? IDEMPOTENCY_LEASE_MS;
  }

  /** Acquires the key or returns the response to replay; throws 409 / 422 problems otherwise. */
  async claim(accountId: string, key: string, fingerprint: string): Promise<ClaimResult> {
    const leaseToken = randomUUID();
    const claim: IdempotencyClaim = await this.options.store.claimIdempotencyKey({
      accountId,
      key,
      fingerprint,
      leaseToken,
      now: this.options.now(),
      leaseMs: this.leaseMs,
      ttlMs: this.ttlMs,
    });
    switch (claim.outcome) {
      case 'acquired':
        return { outcome: 'acquired', held: { accountId, key, leaseToken } };
      case 'replay':
        return claim;
      case 'in_progress':
        throw new RetryLaterError(
          'idempotency_in_progress',
          'A request with this Idempotency-Key is still being processed; retry shortly.',
          IN_PROGRESS_RETRY_AFTER_SECONDS,
        );
      case 'fingerprint_mismatch':
        throw new DomainError(
          'idempotency_key_reused',
          'This Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request.',
        );
    }
  }

  /** Keeps the response for replay; false when the lease had run out and another request took the key. */
  complete(held: HeldIdempotencyKey, response: StoredResponse): Promise<boolean> {
    return this.options.store.completeIdempotencyKey({ ...held, response });
  }

  /** Extends the lease of a key still held; false when it was lost (then stop renewing). */
  renew(held: HeldIdempotencyKey): Promise<boolean> {
    return this.options.store.renewIdempotencyKey({
      ...held,
      leaseExpiresAt: new Date(this.options.now().getTime() + this.leaseMs),
    });
  }

  /** The request changed nothing (or failed on our side): the key is free for a retry. */
  release(held: HeldIdempotencyKey): Promise<void> {
    return this.options.store.releaseIdempotencyKey(held);
  }

  /**
   * Keeps a claimed key's short lease alive while its request works (a large upload, an edit's
   * images stored before the charge), until `stop`. A process that dies stops renewing, so its keys
   * are free again within IDEMPOTENCY_LEASE_MS.
   */
  keepAlive(held: HeldIdempotencyKey, onError: (error: unknown) => void): { stop(): void } {
    const until = Date.now() + MAX_RENEWED_HOLD_MS;
    const timer = setInterval(() => {
      if (Date.now() > until) return clearInterval(timer);
      this.renew(held).then((kept) => {
        // Lost: another request took the key over; renewing it further would be in vain.
        if (!kept) clearInterval(timer);
      }, onError);
    }, IDEMPOTENCY_LEASE_RENEW_MS);
    timer.unref();
    return { stop: () => clearInterval(timer) };
  }
}
