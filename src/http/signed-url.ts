import { Type } from '@sinclair/typebox';
import { DomainError } from '../core/errors.js';

/** The query of a signed URL (a generated item's `url`, a task's `stream_url`). */
export const SignedUrlQueryFields = {
  expires: Type.Optional(
    Type.String({
      maxLength: 12,
      pattern: '^[0-9]{1,12}$',
      description: 'Part of a signed URL: its expiry, in Unix seconds.',
    }),
  ),
  signature: Type.Optional(
    Type.String({ maxLength: 128, pattern: '^[A-Za-z0-9_-]{1,128}$', description: 'Part of a signed URL.' }),
  ),
};

/**
 * The expiry (Unix seconds) of a request's signed URL when it carries one and the signature holds,
 * null when it carries none (the Bearer key must then decide); a 401 for half a signature, an
 * expired URL or a signature that `verify` refuses.
 */
export function signedUrlExpiry(
  query: { expires?: string; signature?: string },
  now: Date,
  verify: (expires: number, signature: string) => boolean,
): number | null {
  const { expires, signature } = query;
  if (expires === undefined && signature === undefined) return null;
  if (expires === undefined || signature === undefined)
    throw new DomainError('unauthorized', 'A signed URL needs both `expires` and `signature`.');
  const expiresSeconds = Number(expires);
  if (expiresSeconds * 1000 <= now.getTime())
    throw new DomainError('unauthorized', 'This signed URL has expired; read the task again for a fresh one.');
  if (!verify(expiresSeconds, signature)) throw new DomainError('unauthorized', 'The URL signature is not valid.');
  return expiresSeconds;
}
