import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { LoadSample, Summary } from '../../bench/lib/load.js';
import {
  checkBudgets,
  renderGenerated,
  writeBenchmarksMd,
  type BenchReport,
  type DispatchResult,
  type HttpRow,
  type LongPollResult,
} from '../../bench/lib/report.js';

import { longPollResult } from '../helpers/long-poll-result.js';

/** How `npm run bench` turns measurements into the budget table of BENCHMARKS.md. */

const summary = (rps: number, ratio: number | null = null, p99 = 15): Summary => ({
  rps,
  p50: 5,
  p99,
  non2xx: 0,
  errors: 0,
  rounds: 1,
  ratio,
  ratios: ratio === null ? [] : [ratio],
  cpuUsPerRequest: 100,
});
const httpRow = (id: string, service: Summary, reference: Summary, connections = 50): HttpRow => ({
  id,
  title: id,
  connections,
  service,
  reference,
  serviceSamples: [] as LoadSample[],
  referenceSamples: [] as LoadSample[],
});

function report(overrides: Partial<BenchReport> = {}): BenchReport {
  return {
    startedAt: '2026-11-24T12:00:00.000Z',
    finishedAt: '2026-11-24T12:07:30.000Z',
    machine: {
      cpus: 2,
      cpuModel: 'test',
      node: 'v20',
      kernel: 'test',
      memoryGiB: 8,
      loadAverage: { start: 3.5, end: 4 },
    },
    command: 'npm run bench',
    settings: {
      rounds: 1,
      shortRounds: 1,
      connections: 50,
      warmupSec: 1,
      durationSec: 4,
      runtime: 'dist',
      sqliteSynchronous: 'FULL (WAL)',
    },
    http: [],
    listFlatness: [],
    upload: null,
    renderer: null,
    dispatch: null,
    longPoll: null,
    download: null,
    sections: [],
    ...overrides,
  };
}

const budgetOf = (r: BenchReport, start: string) => checkBudgets(r).find((c) => c.budget.startsWith(start));

t.test('the create guard rail is 25 % of the reference with a p99 within 25 ms', async (t) => {
  const create = (ratio: number, p99: number) =>
    budgetOf(report({ http: [httpRow('create', summary(9000, ratio, p99), summary(45_000))] }), 'Create text-to-image');
  t.match(create(0.25, 25), { met: true, measured: /^25 % \(9000 vs 45000 req\/s\), p99 25 ms$/ });
  t.match(create(0.24, 10), { met: false }, 'below the share');
  t.match(create(0.3, 26), { met: false }, 'p99 over 25 ms');
});

t.test('the read guard rail is 20 % of the reference', async (t) => {
  const read = (ratio: number) =>
    budgetOf(report({ http: [httpRow('read', summary(20_000, ratio), summary(55_000))] }), 'Read a task');
  t.match(read(0.2), { met: true, target: /≥ 20 %/ });
  t.match(read(0.19), { met: false });
});

t.test('compared builds (--compare-root) appear in the HTTP table but are not judged', async (t) => {
  const r = report({
    http: [
      httpRow('read', summary(20_000, 0.4), summary(50_000)),
      httpRow('read@before19', summary(30_000, 0.6), summary(50_000)),
    ],
  });
  t.equal(checkBudgets(r).length, 1);
  t.match(renderGenerated(r), /\| read@before19 \| 50 \| 30000 \|/);
});

/** A dispatch result with the figures the case names. */
const dispatchResult = (changes: Partial<DispatchResult>): DispatchResult => ({
  tasks: 200,
  workers: 2,
  resolution: '1K 1:1',
  providerModel: 'beta-v5-pro',
  calledMs: { p50: 1.8, p99: 4, max: 5 },
  acceptedMs: { p50: 1.2, p99: 3, max: 4 },
  adapterMs: { p50: 0.6, p99: 1.1, max: 1.5 },
  dispatchFromMs: { p50: 0.6, p99: 1.4, max: 2 },
  recordedMs: { p50: 1, p99: 3, max: 4 },
  completedMs: { p50: 30, p99: 40, max: 50 },
  notCompleted: 0,
  ...changes,
});

t.test('dispatch latency is judged on p50 and p99 of the create → the provider has the call', async (t) => {
  const dispatch = (p50: number, p99: number, notCompleted = 0) =>
    budgetOf(
      report({ dispatch: dispatchResult({ calledMs: { p50, p99, max: p99 + 1 }, notCompleted }) }),
      'Dispatch latency',
    );
  t.match(dispatch(1.8, 4), {
    met: true,
    measured: /^p50 1\.8 ms, p99 4 ms to the provider's receipt of the call \(200 tasks of beta-v5-pro/,
  });
  t.match(dispatch(2.1, 4), { met: false }, 'p50 over 2 ms');
  t.match(dispatch(1.8, 10.2), { met: false }, 'p99 over 10 ms');
  t.match(dispatch(1.8, 4, 1), { met: false }, 'a task that did not complete');
});

t.test(
  "the dispatch text gives the timed figure, its 202, the adapter alone and the local renderer's lower bound",
  async (t) => {
    const text = renderGenerated(
      report({
        dispatch: dispatchResult({
          calledMs: { p50: 3.3, p99: 6.3, max: 7 },
          acceptedMs: { p50: 1.8, p99: 4.8, max: 5 },
          adapterMs: { p50: 0.59, p99: 1.2, max: 1.7 },
          dispatchFromMs: { p50: 0.7, p99: 1.46, max: 2 },
        }),
      }),
    );
    t.match(text, /p50 \*\*3\.3 ms\*\*, p99 \*\*6\.3 ms\*\*/);
    t.match(text, /p50 0\.6 ms, p99 1\.2 ms after `generate\(\)`/);
    t.match(text, /202 after p50 1\.8 ms/);
    t.match(text, /p50 0\.7–1\.7 ms, p99 1\.5–2\.5 ms/);
  },
);

t.test(
  'the long-poll budgets: < 200 MiB RSS held by 5 000 waiting on a service without workers, and a p99 wake-up within 20 ms with 5 000 waiting',
  async (t) => {
    const wake = { count: 400, p50Ms: 3, p99Ms: 12, maxMs: 30 };
    const held = { waiting: 5400, rssBaselineMiB: 150, rssPeakMiB: 250, rssGrowthMiB: 100 };
    const longPoll = longPollResult;
    const rows = (changes: Partial<LongPollResult>) =>
      checkBudgets(report({ longPoll: longPoll(changes) })).filter((c) => c.budget.startsWith('Long-poll'));
    t.match(rows({}), [
      {
        met: true,
        measured:
          /^\+100 MiB \(150 → 250 MiB\) with 5400 waiting at once on a service without workers; \+250 MiB in the run with 2 workers rendering meanwhile$/,
      },
      { met: true, measured: /^p99 12 ms/ },
    ]);
    t.match(
      rows({ heldAtOnce: 4999 }),
      [{ met: true }, { met: false }],
      'fewer than 5 000 waited at once for the wake-ups',
    );
    t.match(rows({ held: { ...held, waiting: 4999 } }), [{ met: false }, { met: true }], 'fewer held for the memory');
    t.match(rows({ held: { ...held, rssGrowthMiB: 200 } }), [{ met: false }, { met: true }]);
    t.match(rows({ held: { ...held, rssGrowthMiB: 199 } }), [{ met: true }, { met: true }]);
    t.match(
      rows({ rssGrowthMiB: 400 }),
      [{ met: true }, { met: true }],
      "the run's growth with workers rendering is shown, not judged",
    );
    t.match(rows({ completed: { ...wake, p99Ms: 20.5 } }), [{ met: true }, { met: false }]);
    t.match(rows({ notTerminal: 1 }), [{ met: false, measured: /1 answers without an ended task/ }, { met: false }]);
    t.match(renderGenerated(report({ longPoll: longPoll({}) })), /\*\*5400 waiting at once\*\*/);
    t.match(
      renderGenerated(report({ longPoll: longPoll({}) })),
      /5400 long-polls waiting at once on a service without workers/,
    );
    t.match(
      renderGenerated(report({ longPoll: longPoll({}) })),
      /its GC paused 3 times in the measured window, 5 ms in all, at most 2\.5 ms/,
      "the waiting client's own pauses are shown beside the wake-ups",
    );
  },
);

t.test('the result download is judged against @fastify/static at 70 %', async (t) => {
  const download = (ratio: number) =>
    budgetOf(
      report({
        http: [httpRow('download', summary(700, ratio), summary(1000), 10)],
        download: { bytes: 1_000_000, sha256: 'ab'.repeat(32), connections: 10 },
      }),
      'Result download',
    );
  t.match(download(0.7), { met: true, measured: /^70 % \(700 vs 1000 downloads\/s at 10 connections\)$/ });
  t.match(download(0.69), { met: false });
});

const large = (receivedBuffersMiB: number, receivedStatus = 415) => ({
  received: { bytes: 20 * 1024 * 1024, status: receivedStatus, buffersGrowthMiB: receivedBuffersMiB, rssGrowthMiB: 1 },
  stored: { bytes: 20 * 1024 * 1024, status: 201, buffersGrowthMiB: 0.4, rssGrowthMiB: 30 },
});
const upload = (l: ReturnType<typeof large>): BenchReport['upload'] => ({
  uploadBytes: 10 * 1024 * 1024,
  concurrent: 10,
  concurrentStatuses: { 201: 10 },
  concurrentElapsedSec: 2,
  rssBaselineMiB: 160,
  rssPeakMiB: 260,
  rssGrowthMiB: 100,
  peakFrom: 'test',
  large: l,
});

t.test('the 20 MiB upload is met while receiving it grows live Buffers by less than twice the body', async (t) => {
  const row = (l: ReturnType<typeof large>) => budgetOf(report({ upload: upload(l) }), 'Upload: a 20.0 MiB image');
  t.match(row(large(0.4)), { met: true, target: /< 2 × the body \(40 MiB\)/ });
  t.match(row(large(39.9)), { met: true }, 'one copy of the body is within the budget');
  t.match(row(large(40.1)), { met: false }, 'two copies are not');
  t.match(
    row(large(0.4, 201)),
    { met: false, measured: /statuses 201 and 201/ },
    'the body must be refused, never stored as an image',
  );
});

t.test("another bench script's section adds its rows to the budget table and its text after the others", async (t) => {
  const r = report({
    http: [httpRow('create', summary(9000, 0.25), summary(36_000))],
    sections: [
      {
        title: 'Scale-out (PostgreSQL)',
        budgets: [{ budget: 'Creates through 2 api processes', target: '≥ 1.3 ×', measured: '1.4 ×', met: true }],
        lines: ['Two processes.'],
      },
    ],
  });
  t.match(
    checkBudgets(r).map((c) => c.budget),
    ['Create text-to-image (embedded, durable): guard rail', 'Creates through 2 api processes'],
  );
  const text = renderGenerated(r);
  t.match(text, /\| Creates through 2 api processes \| ≥ 1\.3 × \| 1\.4 × \| \*\*met\*\* \|/);
  t.match(text, /### Scale-out \(PostgreSQL\)\n\nTwo processes\.$/);
});

t.test('the report notes how long the run took and the load on the machine', async (t) => {
  t.match(
    renderGenerated(report()),
    /the run took 7\.5 min, with a 1-minute load average of 3\.5 when it started and 4\.0 when it ended/,
  );
});

t.test('BENCHMARKS.md is rewritten between its markers only', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-report-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'BENCHMARKS.md');
  writeFileSync(
    path,
    '# Benchmarks\n\nhand-written before\n\n<!-- bench:begin (generated by `npm run bench`; edit outside these markers) -->\nold table\n<!-- bench:end -->\n\nhand-written after\n',
  );
  writeBenchmarksMd(path, report({ http: [httpRow('read', summary(20_000, 0.4), summary(50_000))] }));
  const text = readFileSync(path, 'utf8');
  t.match(text, /^# Benchmarks\n\nhand-written before\n\n<!-- bench:begin/);
  t.notMatch(text, /old table/);
  t.match(text, /\| Read a task: guard rail \|/);
  t.match(text, /<!-- bench:end -->\n\nhand-written after\n$/);
});
