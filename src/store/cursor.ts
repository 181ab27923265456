import { unknownCursor } from '../core/errors.js';

/** Cursors are opaque to clients: base64url of the adapter's keyset position. */
export function encodeCursor(position: string): string {
  return Buffer.from(position, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string): string {
  const position = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[0-9a-f-]{1,64}$/i.test(position)) throw unknownCursor();
  return position;
}

/**
 * A cursor whose position is a sequence number (the ledger's per-account position): refused unless
 * it is one, so that both adapters answer a forged cursor alike (a number past 2^53 read as a
 * number would round, and return the first page again).
 */
export function decodeSequenceCursor(cursor: string): number {
  const position = decodeCursor(cursor);
  const sequence = Number(position);
  if (!/^[1-9][0-9]*$/.test(position) || !Number.isSafeInteger(sequence)) throw unknownCursor();
  return sequence;
}
