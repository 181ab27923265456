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

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

/**
 * What one delivery attempt leaves behind: the delivery's status and its next attempt. A manual
 * retry is outside the schedule: when it fails, the delivery goes back to the scheduled attempt it
 * went ahead of (or stays failed), rather than taking the schedule's next slot.
 */
export function afterWebhookAttempt(input: {
  /** The receiver answered 2xx. */
  delivered: boolean;
  /** The receiver's answer ends the delivery (e.g. 410 Gone): no further attempt. */
  stop: boolean;
  delivery: { scheduledAttempts: number; manualRetry: { resumeAt: Date | null } | null };
  now: Date;
  random: () => number;
  scale?: number;
}): { status: WebhookDeliveryStatus; nextAttemptAt: Date | null } {
  const { delivery } = input;
  if (input.delivered) return { status: 'delivered', nextAttemptAt: null };
  const nextAttemptAt = input.stop
    ? null
    : delivery.manualRetry
      ? delivery.manualRetry.resumeAt
      : nextWebhookAttemptAt(delivery.scheduledAttempts + 1, input.now, input.random, input.scale);
  return { status: nextAttemptAt ? 'pending' : 'failed', nextAttemptAt };
}

/** How far an attempt moves the retry schedule: a manual retry does not move it. */
export function scheduledAttemptsAdded(attempt: { manual: boolean }): 0 | 1 {
  return attempt.manual ? 0 : 1;
}
