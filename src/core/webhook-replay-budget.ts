import { DomainError } from './errors.js';
import type { WebhookDeliveryStatus } from './webhook-retry-schedule.js';

/** How many manual replays (POST …/retry) are allowed within a sliding window (docs/design.md §3.6). */
export interface WebhookReplayBudget {
  perDelivery: number;
  perAccount: number;
  windowMs: number;
}

/** The replays already made in the window: how many, and when the oldest of them was. */
export interface ReplaysInWindow {
  count: number;
  oldestAt: Date | null;
}

/**
 * A refused replay: `retry_in_progress` while the delivery's last manual replay is queued or being
 * sent, `retry_budget_exhausted` beyond the budget. `retryAfterMs` is when a budget frees a slot
 * (null: as soon as the replay in progress ends, which has no date).
 */
export class WebhookReplayRefused extends DomainError {
  constructor(
    code: 'retry_in_progress' | 'retry_budget_exhausted',
    message: string,
    readonly retryAfterMs: number | null,
  ) {
    super(code, message);
    this.name = 'WebhookReplayRefused';
  }
}

/**
 * Whether one more manual replay of a delivery may be queued; throws WebhookReplayRefused if not.
 * Each replay makes the receiver get one more signed POST at a URL of the client's choosing, so
 * replays are one at a time and budgeted per delivery and per account; scheduled retries are not
 * counted and keep their schedule.
 */
export function assertReplayAllowed(input: {
  manualReplayPending: boolean;
  delivery: ReplaysInWindow;
  account: ReplaysInWindow;
  budget: WebhookReplayBudget;
  now: Date;
}): void {
  const { budget, now } = input;
  if (input.manualReplayPending)
    throw new WebhookReplayRefused(
      'retry_in_progress',
      'A replay of this delivery is already queued or being sent; retry once it has been attempted.',
      null,
    );
  const waitFor = (replays: ReplaysInWindow) =>
    Math.max(1000, (replays.oldestAt?.getTime() ?? now.getTime()) + budget.windowMs - now.getTime());
  const minutes = Math.round(budget.windowMs / 60_000);
  if (input.delivery.count >= budget.perDelivery)
    throw new WebhookReplayRefused(
      'retry_budget_exhausted',
      `A delivery can be replayed ${budget.perDelivery} times per ${minutes} minutes; this one has been.`,
      waitFor(input.delivery),
    );
  if (input.account.count >= budget.perAccount)
    throw new WebhookReplayRefused(
      'retry_budget_exhausted',
      `An account can replay ${budget.perAccount} deliveries per ${minutes} minutes; this one has.`,
      waitFor(input.account),
    );
}

/** Replays made at or before this instant have left the window: the stores forget them. */
export function replayWindowStart(now: Date, budget: WebhookReplayBudget): Date {
  return new Date(now.getTime() - budget.windowMs);
}

/** What queueing a manual replay writes on the delivery: an attempt due now, ahead of the schedule. */
export interface ManualReplay {
  status: 'pending';
  nextAttemptAt: Date;
  /**
   * The scheduled attempt the replay goes ahead of, kept so that a failed replay leaves the
   * schedule where it was; null when the schedule had ended (the delivery succeeded or failed).
   */
  resumeAt: Date | null;
}

/**
 * A manual replay of `delivery` at `now`, within the budget (throws WebhookReplayRefused as
 * assertReplayAllowed does): what the store writes on the delivery row.
 */
export function manualReplayOf(input: {
  delivery: { status: WebhookDeliveryStatus; nextAttemptAt: Date | null; manualRetryPending: boolean };
  deliveryReplays: ReplaysInWindow;
  accountReplays: ReplaysInWindow;
  budget: WebhookReplayBudget;
  now: Date;
}): ManualReplay {
  const { delivery, now } = input;
  assertReplayAllowed({
    manualReplayPending: delivery.manualRetryPending,
    delivery: input.deliveryReplays,
    account: input.accountReplays,
    budget: input.budget,
    now,
  });
  return {
    status: 'pending',
    nextAttemptAt: now,
    resumeAt: delivery.status === 'pending' ? delivery.nextAttemptAt : null,
  };
}
