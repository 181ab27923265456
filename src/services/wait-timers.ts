/**
 * One timer for every waiting request's deadline (a timer wheel): a wait registers a callback in
 * the slot its delay falls in, and a single interval runs one slot per tick while anything waits.
 * Thousands of long-polls and event streams each with a Timeout of their own cost a Timeout, its
 * closure and a clearTimeout each; here a wait is its own function in a Set. A callback never
 * runs early; on an idle loop at most one tick late. A delay beyond the wheel's horizon is cut to
 * it: the waiter re-arms.
 *
 * The wheel moves one slot per run of its interval, so a busy loop stretches every delay (5 000
 * open streams on two loaded cores: a 1 s delay took 2.5 s). That was kept on purpose while every
 * waiter re-read its task at each of its turns, which the lag shed under load (decision 0029); the
 * wheel now holds only deadlines (the change poll found the rest), a wait at most a few seconds late.
 */
export class WaitTimers {
  private readonly slots: Set<() => void>[];
  private cursor = 0;
  private waiting = 0;
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param tickMs the wheel's resolution (how late a callback may run)
   * @param horizonMs the longest delay taken; longer ones are cut to it
   */
  constructor(
    private readonly tickMs: number,
    horizonMs: number,
  ) {
    this.slots = Array.from({ length: Math.ceil(horizonMs / tickMs) + 2 }, () => new Set());
  }

  /**
   * Runs `fire` once delayMs have passed (rounded up to a tick); returns its slot, for cancel().
   * `fire` is a waiter's own function, scheduled at most once at a time: the wheel keeps it as it
   * is, so that a wait re-armed every fallback interval allocates nothing that lives until it runs
   * (objects that outlive V8's young generation are copied and promoted: docs/performance-history.md, "Long-poll
   * wake-ups and the young generation").
   */
  after(delayMs: number, fire: () => void): number {
    const ticks = Math.min(this.slots.length - 1, Math.max(1, Math.ceil(delayMs / this.tickMs)));
    const slot = (this.cursor + ticks) % this.slots.length;
    this.slots[slot].add(fire);
    this.waiting++;
    this.timer ??= setInterval(() => this.tick(), this.tickMs);
    return slot;
  }

  /** `fire` will not run from `slot` (after() returned it); nothing happens if it ran already. */
  cancel(slot: number, fire: () => void): void {
    if (this.slots[slot].delete(fire) && --this.waiting === 0) this.stop();
  }

  private tick(): void {
    this.cursor = (this.cursor + 1) % this.slots.length;
    const due = this.slots[this.cursor];
    if (due.size > 0) {
      const entries = [...due];
      due.clear();
      this.waiting -= entries.length;
      for (const fire of entries) fire();
    }
    if (this.waiting === 0) this.stop();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
