/**
 * A list a test records into (claims made, runs started, signals heard) and can wait on until it
 * holds `count` entries, instead of sleeping. `items` is the plain array, for assertions.
 */
export class AwaitedList<T> {
  readonly items: T[] = [];
  private waiters: { count: number; resolve: () => void }[] = [];

  push(item: T): void {
    this.items.push(item);
    const reached = this.waiters.filter((waiter) => waiter.count <= this.items.length);
    this.waiters = this.waiters.filter((waiter) => waiter.count > this.items.length);
    for (const waiter of reached) waiter.resolve();
  }

  /** Resolves once the list holds at least `count` entries. */
  reached(count: number): Promise<void> {
    if (this.items.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }
}
