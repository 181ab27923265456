import type { LongPollResult } from '../../bench/lib/report.js';

/** A long-poll (or event-stream) bench result within every budget, with `changes` applied. */
export function longPollResult(changes: Partial<LongPollResult> = {}): LongPollResult {
  const wake = { count: 400, p50Ms: 3, p99Ms: 12, maxMs: 30 };
  return {
    held: { waiting: 5400, rssBaselineMiB: 150, rssPeakMiB: 250, rssGrowthMiB: 100 },
    requests: 5600,
    workers: 2,
    heldAtOnce: 5400,
    sendingSec: 2,
    rssBaselineMiB: 150,
    rssPeakMiB: 400,
    rssGrowthMiB: 250,
    rssPeakWithCancelsMiB: 300,
    peakFrom: 'test',
    completed: wake,
    canceled: { ...wake, count: 5000 },
    clientGcPauses: { count: 3, maxMs: 2.5, totalMs: 5 },
    statuses: { '200 COMPLETED': 600, '200 CANCELED': 5000 },
    notTerminal: 0,
    ...changes,
  };
}
