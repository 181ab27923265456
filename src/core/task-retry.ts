/**
 * Backoff before retrying a task whose generation failed transiently: exponential from `baseMs`,
 * capped, with ±20 % jitter so that tasks failed together do not retry together. An upstream's
 * Retry-After is a floor: retrying sooner would only earn another 429.
 */
export function generationRetryDelayMs(
  attemptsMade: number,
  baseMs: number,
  random: () => number,
  retryAfterMs = 0,
): number {
  const exponential = Math.min(baseMs * 2 ** Math.max(0, attemptsMade - 1), baseMs * 32);
  return Math.max(Math.round(exponential * (0.8 + 0.4 * random())), retryAfterMs);
}
