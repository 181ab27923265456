import { DomainError } from './errors.js';

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
