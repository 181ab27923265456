/**
 * One timer for every waiting request's timeouts (a timer wheel): a wait registers a callback in
 * the slot its delay falls in, and a single interval runs one slot per tick while anything waits.
 * Thousands of long-polls and event streams each re-arming a timer of their own every
 * LONG_POLL_FALLBACK_MS cost a Timeout, its closure and a clearTimeout each time; here a wait is
 * an entry in a Set. A callback never runs early; on an idle loop at most one tick late.
 *
 * The wheel moves one slot per run of its interval, so a busy loop stretches every delay (5 000
 * open streams on two loaded cores: a 1 s fallback took 2.5 s). That is kept on purpose: it
 * sheds the waiters' fallback re-reads when the process is behind, and a wheel kept to the clock
 * measured +100 MiB and slower opens under load (decision 0029).
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

  /** Runs fire once delayMs have passed (rounded up to a tick); the returned function cancels it. */
  after(delayMs: number, fire: () => void): () => void {
    const ticks = Math.min(this.slots.length - 1, Math.max(1, Math.ceil(delayMs / this.tickMs)));
    const slot = this.slots[(this.cursor + ticks) % this.slots.length];
    let pending = true;
    const entry = () => {
      pending = false;
      this.waiting--;
      fire();
    };
    slot.add(entry);
    this.waiting++;
    this.timer ??= setInterval(() => this.tick(), this.tickMs);
    return () => {
      if (!pending || !slot.delete(entry)) return;
      pending = false;
      if (--this.waiting === 0) this.stop();
    };
  }

  private tick(): void {
    this.cursor = (this.cursor + 1) % this.slots.length;
    const due = this.slots[this.cursor];
    if (due.size > 0) {
      const entries = [...due];
      due.clear();
      for (const entry of entries) entry();
    }
    if (this.waiting === 0) this.stop();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
