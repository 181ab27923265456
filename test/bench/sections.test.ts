import t from 'tap';
import type { LongPollResult } from '../../bench/lib/report.js';
import type { Summary } from '../../bench/lib/load.js';
import {
  capacitySection,
  createCeilingSection,
  eventStreamSection,
  photoUploadSection,
  s3UploadSection,
  scaleOutSection,
} from '../../bench/lib/sections.js';
import { longPollResult } from '../helpers/long-poll-result.js';
import type { CapacityResult } from '../../bench/scenarios/capacity.js';

/** How the scale-out and real-photo results become rows of BENCHMARKS.md's budget table. */

t.test('scale-out rows are judged by their own budgets; rows without a budget are listed but not judged', async (t) => {
  const row = (scenario: string, ours: number, reference: number | null, ratio: number | null, budget: string) => ({
    scenario,
    ours,
    reference,
    unit: 'x',
    ratio,
    budget,
  });
  const section = scaleOutSection([
    row('dispatch p50', 2.5, 2.0, 0.8, 'p50 ≤ graphile-worker p50'),
    row('dispatch p99', 24, 6, 0.25, 'p99 ≤ 25 ms'),
    row('no-op tasks/s, 4 slots', 510, 1000, 0.51, '≥ 0.5 × graphile-worker at concurrency 4'),
    row('no-op tasks/s, 4 slots', 490, 1000, 0.49, '≥ 0.5 × graphile-worker at concurrency 4'),
    row('creates/s, 1 api process', 900, null, null, ''),
    row('creates/s, 2 api processes', 1100, 900, 1.22, '≥ 1.3 × one process'),
    row('list, first page, 1 M stored tasks', 850, 1000, 0.85, '1 M ≥ 80 % of 10 k'),
    row('list, deep cursor, 1 M stored tasks', 750, 1000, 0.75, '1 M ≥ 80 % of 10 k'),
  ]);
  t.same(
    section.budgets.map((b) => b.met),
    [false, true, true, false, false, true, false],
  );
  t.equal(
    section.lines.filter((line) => line.startsWith('| creates/s')).length,
    2,
    'every row is in the section table',
  );
});

t.test('a photo burst is met only when the report says it kept both budgets', async (t) => {
  const burst = (within_budget: boolean) => ({
    fixture: 'JPEG',
    upload_bytes: 20 * 2 ** 20,
    statuses: [201],
    elapsed_ms: 1000,
    rss_baseline_mib: 100,
    rss_peak_mib: 200,
    rss_growth_mib: 100,
    rss_after_settle_mib: 110,
    after_settle_vs_baseline: 1.1,
    within_budget,
  });
  const section = photoUploadSection({
    uploads_per_burst: 10,
    allocator: { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '2' },
    decode_concurrency: 2,
    settle_ms: 60_000,
    budget: { peak_growth_mib: 300, after_settle_vs_baseline_at_most: 1.2 },
    bursts: [burst(true), burst(false)],
    within_budget: false,
  });
  t.same(
    section.budgets.map((b) => b.met),
    [true, false],
  );
  t.match(section.budgets[0].measured, '+100 MiB (100 → 200 MiB), 1.1 × a minute later');
});

t.test('the S3 upload burst is met only with every upload stored and RSS growth under the budget', async (t) => {
  const report = (rssGrowthMiB: number, statuses: Record<string, number>) =>
    s3UploadSection({
      uploadBytes: 10 * 2 ** 20,
      concurrent: 10,
      statuses,
      elapsedSec: 3,
      rssBaselineMiB: 100,
      rssPeakMiB: 100 + rssGrowthMiB,
      rssGrowthMiB,
      budgetMiB: 150,
    }).budgets[0];
  t.equal(report(60, { 201: 10 }).met, true);
  t.match(report(60, { 201: 10 }).measured, '+60 MiB (100 → 160 MiB)');
  t.equal(report(150, { 201: 10 }).met, false, 'at the budget is over it');
  const refused = report(60, { 201: 9, 503: 1 });
  t.equal(refused.met, false, 'an upload that was not stored spends no memory');
  t.match(refused.measured, 'statuses');
});

t.test(
  'capacity rows: makespan ≤ 1.15 × N·L/C, 429s ≤ 10 %, small accounts within 40 %, every task completed',
  async (t) => {
    const result = (overrides: Partial<CapacityResult>): CapacityResult => ({
      setup: 'embedded',
      capacity: 8,
      latencyMs: 500,
      tasks: 400,
      burstTasks: 340,
      smallAccounts: 3,
      smallTasks: 20,
      providerLimitMs: 25_000,
      makespanMs: 28_000,
      makespanRatio: 1.12,
      calls: 420,
      ok: 400,
      rateLimited: 20,
      share429: 20 / 420,
      peakInFlight: 8,
      smallWorstMs: 7_000,
      smallWorstShare: 0.25,
      utilisation: 0.9,
      afterAnswerMs: { p50: 20, max: 80 },
      byStatus: { COMPLETED: 400 },
      notCompleted: 0,
      refusedCreates: {},
      ...overrides,
    });
    const section = capacitySection([
      result({}),
      result({
        setup: 'cluster',
        makespanMs: 30_000,
        makespanRatio: 1.2,
        rateLimited: 50,
        share429: 50 / 450,
        smallWorstMs: 12_000,
        smallWorstShare: 0.4,
        byStatus: { COMPLETED: 399, FAILED: 1 },
        notCompleted: 1,
      }),
    ]);
    t.same(
      section.budgets.map((b) => b.met),
      [true, true, true, true, false, false, true, false],
    );
    t.equal(
      section.lines.filter((line) => /^\| (embedded|cluster) \|/.test(line)).length,
      2,
      'one table row per setup',
    );
  },
);

t.test('event streams are judged by the long-poll budgets: 5 000 open, < 200 MiB, p99 wake-up ≤ 20 ms', async (t) => {
  const wake = { count: 300, p50Ms: 4, p99Ms: 15, maxMs: 30 };
  const result = (changes: Partial<LongPollResult>) => longPollResult({ completed: wake, ...changes });
  const met = (changes: Partial<LongPollResult>) => eventStreamSection(result(changes)).budgets.map((b) => b.met);
  t.same(met({}), [true, true]);
  t.same(met({ heldAtOnce: 4999 }), [true, false], 'fewer than 5 000 open at once for the wake-ups');
  const held = { waiting: 5400, rssBaselineMiB: 150, rssPeakMiB: 250, rssGrowthMiB: 100 };
  t.same(met({ held: { ...held, waiting: 4999 } }), [false, true], 'fewer than 5 000 held for the memory');
  t.same(met({ held: { ...held, rssGrowthMiB: 200 } }), [false, true]);
  t.same(met({ held: { ...held, rssGrowthMiB: 199 } }), [true, true]);
  t.same(met({ rssGrowthMiB: 400 }), [true, true], "the run's growth with workers rendering is not judged");
  t.same(met({ completed: { ...wake, p99Ms: 21 } }), [true, false]);
  t.same(met({ notTerminal: 1 }), [false, false], 'a stream that ended without its task ending');
});

t.test("the event streams' section says how often the waiting client itself paused for GC", async (t) => {
  const section = eventStreamSection(longPollResult({ clientGcPauses: { count: 2, maxMs: 4.5, totalMs: 6 } }));
  t.match(section.lines.join('\n'), /its GC paused 2 times in the measured window, 6 ms in all, at most 4\.5 ms/);
});

t.test(
  "the create's ceiling: the reference's CPU over itself and the store's write, judged by no budget",
  async (t) => {
    const summary = (cpuUsPerRequest: number | null): Summary => ({
      rps: 1000,
      p50: 1,
      p99: 2,
      non2xx: 0,
      errors: 0,
      rounds: 5,
      ratio: null,
      ratios: [],
      cpuUsPerRequest,
    });
    const create = (reference: number | null, service: number | null) => ({
      id: 'create',
      title: 'Create text-to-image',
      connections: 50,
      service: summary(service),
      reference: summary(reference),
      serviceSamples: [],
      referenceSamples: [],
    });
    const store = {
      connections: 50,
      creates_per_round: 20000,
      rounds: [{ cpu_us_per_create: 60, wall_us_per_create: 66 }],
      cpu_us_per_create: 60,
      creates_per_sec: 15152,
    };

    const section = createCeilingSection(store, create(20, 140));
    t.same(section.budgets, [], 'a figure to read the budget against, not a budget');
    const text = section.lines.join('\n');
    t.match(text, '**60 µs of CPU per create**');
    t.match(text, '20 / (20 + 60) = **25 %**', 'the ceiling: the reference alone beside the store');
    t.match(text, '140 − 60 = 80 µs,\n4.0 × the reference', "the rest of the service's create");

    const awkward = createCeilingSection({ ...store, cpu_us_per_create: 64.1 }, create(38, 100)).lines.join('\n');
    t.match(awkward, '100 − 64.1 = 35.9 µs', 'the difference as written, not as floating point leaves it');

    const withoutCpu = createCeilingSection(store, create(null, 140)).lines.join('\n');
    t.match(withoutCpu, '**60 µs of CPU per create**');
    t.notMatch(withoutCpu, 'the bare fastify reference spent', "no ceiling without the reference's CPU");
  },
);
