import { V7Generator } from 'uuidv7';

const generator = new V7Generator();

/**
 * A UUIDv7 whose timestamp is `now`, so that the id and the created_at stored beside it agree and
 * keyset ranges on ids can stand in for ranges on time.
 */
export function newIdAt(now: Date): string {
  return generator.generateOrResetWithTs(now.getTime()).toString();
}

/** The smallest UUIDv7 string of the given millisecond: ids >= it were made at or after it. */
export function uuidv7Floor(at: Date): string {
  const hex = Math.max(0, at.getTime()).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}
