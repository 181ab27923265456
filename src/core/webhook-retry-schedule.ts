const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Delay before each delivery attempt; the first attempt is immediate. */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

const JITTER_FRACTION = 0.1;

/**
 * When to make the next delivery attempt, or null once every attempt is used.
 * Jitter (±10 %) spreads retries so receivers that failed together are not hit together again.
 * `scale` multiplies the delays (tests shrink the schedule with e.g. 0.001).
 */
export function nextWebhookAttemptAt(attemptsMade: number, now: Date, random: () => number, scale = 1): Date | null {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 0) {
    throw new RangeError(`attemptsMade must be a non-negative integer, got ${attemptsMade}`);
  }
  if (attemptsMade >= WEBHOOK_RETRY_DELAYS_MS.length) return null;
  const jitter = 1 + (random() * 2 - 1) * JITTER_FRACTION;
  const delayMs = Math.round(WEBHOOK_RETRY_DELAYS_MS[attemptsMade] * scale * jitter);
  return new Date(now.getTime() + delayMs);
}
