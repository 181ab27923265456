/**
 * Runs at most `limit` jobs at once; the others wait their turn in arrival order. A finishing job
 * hands its slot straight to the next waiter, so a newcomer can never overtake the queue.
 */
export class ConcurrencyLimit {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`concurrency limit must be a positive integer, got ${limit}`);
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.active < this.limit) this.active += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }

  /** Jobs running plus jobs waiting (for metrics and tests). */
  get pending(): number {
    return this.active + this.waiting.length;
  }
}
