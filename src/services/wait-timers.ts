/** A waiting callback: the tick it is due at, and the slot that holds it now. */
interface WaitEntry {
  dueTick: number;
  slot: Set<WaitEntry>;
  fire: () => void;
}

/**
 * One timer for every waiting request's timeouts (a timer wheel): a wait registers a callback in
 * the slot its due tick falls in, and a single interval runs the slots while anything waits.
 * Thousands of long-polls and event streams each re-arming a timer of their own every
 * LONG_POLL_FALLBACK_MS cost a Timeout, its closure and a clearTimeout each time; here a wait is
 * an entry in a Set. A callback never runs early, and at most a tick after its time once the event
 * loop gets to the interval.
 *
 * Ticks are counted on the clock, not by the interval's runs: a busy event loop (5 000 open
 * streams on two loaded cores) runs a 10 ms interval every 25-60 ms, and a wheel that moved one
 * slot per run stretched a 1 s fallback to 2.5 s and more (issue 40). Each run takes every slot
 * whose time has come.
 */
export class WaitTimers {
  private readonly slots: Set<WaitEntry>[];
  /** The last tick whose slot ran; ticks are the clock's milliseconds / tickMs. */
  private lastTick = 0;
  private waiting = 0;
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param tickMs the wheel's resolution (how late a callback may run)
   * @param horizonMs the longest delay usually taken (the wheel's size); a longer one is placed
   *   again when its slot comes round, and still runs on time
   * @param clock milliseconds now, monotonic (a wall clock set back would hold every wait back)
   */
  constructor(
    private readonly tickMs: number,
    horizonMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.slots = Array.from({ length: Math.ceil(horizonMs / tickMs) + 2 }, () => new Set());
  }

  /** Runs fire once delayMs have passed (rounded up to a tick); the returned function cancels it. */
  after(delayMs: number, fire: () => void): () => void {
    const now = this.clock();
    if (this.timer === null) {
      this.lastTick = Math.floor(now / this.tickMs);
      this.timer = setInterval(() => this.tick(), this.tickMs);
    }
    // Rounded up, and never the slot that ran last: never early.
    const dueTick = Math.max(this.lastTick + 1, Math.ceil((now + Math.max(0, delayMs)) / this.tickMs));
    let pending = true;
    const entry: WaitEntry = {
      dueTick,
      slot: this.slots[0],
      fire: () => {
        pending = false;
        this.waiting--;
        fire();
      },
    };
    this.place(entry);
    this.waiting++;
    return () => {
      if (!pending || !entry.slot.delete(entry)) return;
      pending = false;
      if (--this.waiting === 0) this.stop();
    };
  }

  /** Into the slot of its due tick, or, beyond one turn of the wheel, the turn's last slot. */
  private place(entry: WaitEntry): void {
    const tick = Math.min(entry.dueTick, this.lastTick + this.slots.length - 1);
    entry.slot = this.slots[tick % this.slots.length];
    entry.slot.add(entry);
  }

  private tick(): void {
    const nowTick = Math.floor(this.clock() / this.tickMs);
    while (this.lastTick < nowTick) {
      this.lastTick++;
      const due = this.slots[this.lastTick % this.slots.length];
      if (due.size === 0) continue;
      const entries = [...due];
      due.clear();
      for (const entry of entries) {
        if (entry.dueTick > this.lastTick) this.place(entry);
        else entry.fire();
      }
    }
    if (this.waiting === 0) this.stop();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
