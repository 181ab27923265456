import { randomFillSync } from 'node:crypto';
import { V7Generator } from 'uuidv7';

/**
 * The generator's random bits, drawn from the OS a thousand values at a time. uuidv7's default
 * source asks `crypto.getRandomValues` for 8 values at a time, and a UUIDv7 takes 1 to 3 of them:
 * that call was about 9 000 of the 14 000 instructions an id cost, on every create (docs/performance-history.md,
 * "Optimisations"). The bits are still the OS's cryptographically strong ones; ids are not secrets.
 */
class BufferedOsRandom {
  private readonly values = new Uint32Array(1024);
  private next = this.values.length;

  nextUint32(): number {
    if (this.next === this.values.length) {
      randomFillSync(this.values);
      this.next = 0;
    }
    return this.values[this.next++];
  }
}

const generator = new V7Generator(new BufferedOsRandom());

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
