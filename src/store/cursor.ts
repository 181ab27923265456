import { DomainError } from '../core/errors.js';

/** Cursors are opaque to clients: base64url of the adapter's keyset position. */
export function encodeCursor(position: string): string {
  return Buffer.from(position, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const position = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[0-9a-f-]{1,64}$/i.test(position)) {
    throw new DomainError('invalid_request', 'The cursor is not one this API returned.', [
      { pointer: '/cursor', location: 'query', code: 'invalid_format', detail: 'Unknown cursor.' },
    ]);
  }
  return position;
}
