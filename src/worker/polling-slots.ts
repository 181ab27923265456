/**
 * N concurrent loops that each call `runOnce` until it reports no work, then sleep for pollMs or
 * until poked. Work made in this process pokes them at once; work made by other processes is
 * found at the next poll.
 */
export class PollingSlots {
  private readonly loops: Promise<void>[] = [];
  private readonly sleeping = new Set<() => void>();
  private stopping = false;

  constructor(
    private readonly options: {
      concurrency: number;
      pollMs: number;
      /** Does at most one unit of work; false when there was none. */
      runOnce: () => Promise<boolean>;
      onError: (error: unknown) => void;
    },
  ) {}

  start(): void {
    for (let i = 0; i < this.options.concurrency; i++) this.loops.push(this.loop());
  }

  /** Wakes every sleeping loop. */
  poke(): void {
    for (const wake of [...this.sleeping]) wake();
  }

  /** Stops starting new work; resolves when every loop has finished its current unit. */
  stop(): Promise<void> {
    this.stopping = true;
    this.poke();
    return Promise.all(this.loops).then(() => undefined);
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      let worked = false;
      try {
        worked = await this.options.runOnce();
      } catch (error) {
        this.options.onError(error);
      }
      if (!worked && !this.stopping) await this.sleep();
    }
  }

  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleeping.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.options.pollMs);
      this.sleeping.add(wake);
    });
  }
}
