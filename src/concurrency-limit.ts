/**
 * Runs at most `limit` jobs at once; the others wait their turn in arrival order. A finishing job
 * hands its slot straight to the next waiter, so a newcomer can never overtake the queue.
 */
export class ConcurrencyLimit {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`concurrency limit must be a positive integer, got ${limit}`);
  }

  /** With `signal`, a job still waiting for its turn leaves the queue when it aborts (rejecting with its reason). */
  async run<T>(job: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    if (this.active < this.limit) this.active += 1;
    else await this.turn(signal);
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }

  private turn(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const index = this.waiting.indexOf(takeSlot);
        if (index === -1) return;
        this.waiting.splice(index, 1);
        reject(signal?.reason);
      };
      // Called by a finishing job with its slot: from then on the job owns the slot and runs.
      const takeSlot = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.waiting.push(takeSlot);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Jobs running plus jobs waiting (for metrics and tests). */
  get pending(): number {
    return this.active + this.waiting.length;
  }
}
