/**
 * The machine's wall clock in ms with sub-ms resolution, on the same scale as `Date.now()` in any
 * process of this machine (the service records `created_at`, `started_at` and `completed_at` from
 * its `Date`, in whole ms). `Date.now()` only ticks in whole ms, so the clock waits for a tick and
 * anchors `performance.now()` (monotonic, sub-µs) at that edge. Make a new one per scenario: the
 * two clocks may drift apart by a few µs a minute.
 */
export function wallClock(): () => number {
  const start = Date.now();
  let edge = Date.now();
  while (edge === start) edge = Date.now();
  const offset = edge - performance.now();
  return () => performance.now() + offset;
}
