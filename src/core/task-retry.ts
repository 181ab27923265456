/**
 * Backoff before retrying a task whose generation failed transiently: exponential from `baseMs`,
 * capped, with ±20 % jitter so that tasks failed together do not retry together.
 */
export function generationRetryDelayMs(attemptsMade: number, baseMs: number, random: () => number): number {
  const exponential = Math.min(baseMs * 2 ** Math.max(0, attemptsMade - 1), baseMs * 32);
  return Math.round(exponential * (0.8 + 0.4 * random()));
}
