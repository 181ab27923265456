import { SEED_MAX } from '../../schemas/model-entry.js';

/**
 * Seeds (docs/design.md §3.1): every task is made with a seed, so that every result can be made
 * again. The randomness of a drawn seed is the caller's (passed in); the rules are here.
 */

/** How many seeds there are: 0 to SEED_MAX. */
const SEED_COUNT = SEED_MAX + 1;

/** The seed of image `index` of a request of several (OpenAI's `n`): seed + index, wrapping within the range. */
export function seedAt(seed: number, index: number): number {
  return (seed + index) % SEED_COUNT;
}
