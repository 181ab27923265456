import t from 'tap';
import {
  manualReplayOf,
  replayWindowStart,
  type ReplaysInWindow,
  type WebhookReplayRefused,
  type WebhookReplayBudget,
} from '../../src/core/webhook-replay-budget.js';
import { afterWebhookAttempt, scheduledAttemptsAdded } from '../../src/core/webhook-retry-schedule.js';

const now = new Date('2026-01-01T12:00:00Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
const budget: WebhookReplayBudget = { perDelivery: 2, perAccount: 3, windowMs: 3_600_000 };
const none: ReplaysInWindow = { count: 0, oldestAt: null };
const replayOf = (delivery: Parameters<typeof manualReplayOf>[0]['delivery'], replays = none) =>
  manualReplayOf({ delivery, deliveryReplays: replays, accountReplays: none, budget, now });

t.test('a replay of a pending delivery keeps the scheduled attempt it goes ahead of', async (t) => {
  const replay = replayOf({ status: 'pending', nextAttemptAt: at(300_000), manualRetryPending: false });
  t.same(replay, { status: 'pending', nextAttemptAt: now, resumeAt: at(300_000) });
});

t.test('a replay of a delivered or failed delivery has no schedule to resume', async (t) => {
  for (const status of ['delivered', 'failed'] as const) {
    const replay = replayOf({ status, nextAttemptAt: null, manualRetryPending: false });
    t.same(replay, { status: 'pending', nextAttemptAt: now, resumeAt: null }, status);
  }
});

t.test('a replay while another is pending, or beyond the budget, is refused', async (t) => {
  t.throws(() => replayOf({ status: 'pending', nextAttemptAt: now, manualRetryPending: true }), {
    code: 'retry_in_progress',
  });
  const error = t.throws(() =>
    replayOf(
      { status: 'failed', nextAttemptAt: null, manualRetryPending: false },
      { count: 2, oldestAt: at(-600_000) },
    ),
  ) as unknown as WebhookReplayRefused;
  t.equal(error.code, 'retry_budget_exhausted');
  t.equal(error.retryAfterMs, 3_000_000, 'the oldest replay leaves the window in 50 minutes');
});

t.test('replays older than the window are forgotten', async (t) => {
  t.same(replayWindowStart(now, budget), at(-3_600_000));
});

t.test('a failed manual retry resumes the schedule where it was, or leaves the delivery failed', async (t) => {
  const random = () => 0.5;
  t.same(
    afterWebhookAttempt({
      delivered: false,
      stop: false,
      delivery: { scheduledAttempts: 3, manualRetry: { resumeAt: at(60_000) } },
      now,
      random,
    }),
    { status: 'pending', nextAttemptAt: at(60_000) },
  );
  t.same(
    afterWebhookAttempt({
      delivered: false,
      stop: false,
      delivery: { scheduledAttempts: 10, manualRetry: { resumeAt: null } },
      now,
      random,
    }),
    { status: 'failed', nextAttemptAt: null },
  );
});

t.test('a failed scheduled attempt takes the schedule’s next slot; the last one fails the delivery', async (t) => {
  const random = () => 0.5; // no jitter
  t.same(
    afterWebhookAttempt({
      delivered: false,
      stop: false,
      delivery: { scheduledAttempts: 1, manualRetry: null },
      now,
      random,
    }),
    { status: 'pending', nextAttemptAt: at(300_000) },
  );
  t.same(
    afterWebhookAttempt({
      delivered: false,
      stop: false,
      delivery: { scheduledAttempts: 9, manualRetry: null },
      now,
      random,
    }),
    { status: 'failed', nextAttemptAt: null },
  );
});

t.test('a delivered attempt ends the delivery; a receiver that says stop fails it at once', async (t) => {
  const delivery = { scheduledAttempts: 0, manualRetry: null };
  t.same(afterWebhookAttempt({ delivered: true, stop: false, delivery, now, random: Math.random }), {
    status: 'delivered',
    nextAttemptAt: null,
  });
  t.same(afterWebhookAttempt({ delivered: false, stop: true, delivery, now, random: Math.random }), {
    status: 'failed',
    nextAttemptAt: null,
  });
});

t.test('only scheduled attempts move the schedule', async (t) => {
  t.equal(scheduledAttemptsAdded({ manual: true }), 0);
  t.equal(scheduledAttemptsAdded({ manual: false }), 1);
});
