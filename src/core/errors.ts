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

export const notFound = (what: string) => new DomainError('not_found', `${what} not found.`);

/** A list cursor this API did not hand out (forged, truncated, or another list's). */
export const unknownCursor = () =>
  new DomainError('invalid_request', 'The cursor is not one this API returned.', [
    { pointer: '/cursor', location: 'query', code: 'invalid_format', detail: 'Unknown cursor.' },
  ]);
