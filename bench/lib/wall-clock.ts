/**
 * The machine's wall clock in ms with sub-ms resolution, on the same scale as `Date.now()` in any
 * process of this machine (the service records `created_at`, `started_at` and `completed_at` from
 * its `Date`, in whole ms). `Date.now()` only ticks in whole ms, so the clock waits for a tick and
 * anchors `performance.now()` (monotonic, sub-µs) at that edge. A process descheduled between the
 * two reads would anchor late and run behind (answers timed before the completion they report were
 * seen on a loaded machine), so it takes several edges and keeps the earliest anchor. Make a new one
 * per scenario: the two clocks may drift apart by a few µs a minute.
 */
export function wallClock(edges = 5): () => number {
  let offset = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < edges; i++) {
    const start = Date.now();
    let edge = Date.now();
    while (edge === start) edge = Date.now();
    // A delay between the two reads only makes performance.now() larger, so the offset smaller.
    offset = Math.max(offset, edge - performance.now());
  }
  return () => performance.now() + offset;
}
