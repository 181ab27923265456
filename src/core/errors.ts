import type { ErrorCode } from '../../schemas/resources.js';

export type { ErrorCode };

export interface FieldError {
  pointer: string;
  location: 'body' | 'query' | 'path' | 'header';
  code: string;
  detail: string;
}

/**
 * A failure the client can act on. It carries a stable `code`; the HTTP layer alone decides the
 * status and the problem+json shape, so the core stays free of HTTP.
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fieldErrors: FieldError[] = [],
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/**
 * A refusal that knows when a retry can succeed (a backend's open circuit, a rate limit's window):
 * every face announces that wait (Retry-After, MCP's retry_after_seconds).
 */
export class RetryLaterError extends DomainError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(code, message);
  }
}

export const notFound = (what: string) => new DomainError('not_found', `${what} not found.`);

/** A list cursor this API did not hand out (forged, truncated, or another list's). */
export const unknownCursor = () =>
  new DomainError('invalid_request', 'The cursor is not one this API returned.', [
    { pointer: '/cursor', location: 'query', code: 'invalid_format', detail: 'Unknown cursor.' },
  ]);
