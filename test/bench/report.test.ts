import t from 'tap';
import type { LoadSample, Summary } from '../../bench/lib/load.js';
import { checkBudgets, dutiesAndStoreCeiling, renderGenerated, storeCeiling, type BenchReport, type HttpRow } from '../../bench/lib/report.js';

/** How `npm run bench` turns measurements into the budget table of BENCHMARKS.md. */

const summary = (rps: number, cpuUsPerRequest: number, ratio: number | null = null, kiloInstructionsPerRequest: number | null = null): Summary => ({
  rps, p50: 5, p99: 15, non2xx: 0, errors: 0, rounds: 1, ratio, ratios: ratio === null ? [] : [ratio], cpuUsPerRequest, kiloInstructionsPerRequest,
});
const httpRow = (id: string, service: Summary, reference: Summary): HttpRow => ({
  id, title: id, connections: 50, service, reference, serviceSamples: [] as LoadSample[], referenceSamples: [] as LoadSample[],
});

function report(overrides: Partial<BenchReport> = {}): BenchReport {
  return {
    startedAt: '2026-11-22T20:00:00.000Z',
    finishedAt: '2026-11-22T20:09:00.000Z',
    machine: { cpus: 2, cpuModel: 'test', node: 'v20', kernel: 'test', memoryGiB: 8 },
    command: 'npm run bench',
    settings: { rounds: 1, shortRounds: 1, connections: 50, warmupSec: 1, durationSec: 4, runtime: 'dist', sqliteSynchronous: 'FULL (WAL)' },
    http: [httpRow('create', summary(8000, 120, 0.18), summary(45_000, 20)), httpRow('read', summary(24_000, 42, 0.44), summary(55_000, 15))],
    listFlatness: [],
    upload: null,
    storeFloor: { rounds: 3, createUs: 60, readUs: 5, createUsPerRound: [60, 61, 59], readUsPerRound: [5, 5, 5] },
    renderer: null,
    e2e: null,
    ...overrides,
  };
}

const large = (receivedBuffersMiB: number, receivedStatus = 415) => ({
  received: { bytes: 20 * 1024 * 1024, status: receivedStatus, buffersGrowthMiB: receivedBuffersMiB, rssGrowthMiB: 1 },
  stored: { bytes: 20 * 1024 * 1024, status: 201, buffersGrowthMiB: 0.4, rssGrowthMiB: 30 },
});
const upload = (l: ReturnType<typeof large>): BenchReport['upload'] => ({
  uploadBytes: 10 * 1024 * 1024, mbPerSec: 40, referenceMbPerSec: 1000, concurrent: 10, concurrentStatuses: { 201: 10 }, concurrentElapsedSec: 2,
  rssBaselineMiB: 160, rssPeakMiB: 260, rssGrowthMiB: 100, peakFrom: 'test', large: l,
});

t.test('the ceiling is reference / (reference + store), from the reference CPU time of the same run', async (t) => {
  const r = report();
  t.equal(storeCeiling(r.http[0], 60), 20 / 80);
  t.equal(storeCeiling(r.http[1], 5), 15 / 20);
  t.equal(storeCeiling(undefined, 60), null, 'no create scenario in the run');
  t.equal(storeCeiling(r.http[0], undefined), null, 'no store floor in the run');
});

t.test('the create and read budget rows give their ceiling next to the measured ratio', async (t) => {
  const [create, read] = checkBudgets(report());
  t.match(create, { met: false, measured: /^18 % .*; ceiling 25 % \(the store alone: 60 µs per request\)$/ });
  t.match(read, { met: false, measured: /^44 % .*; ceiling 75 % \(the store alone: 5 µs per request\)$/ });
  const withoutFloor = checkBudgets(report({ storeFloor: null }));
  t.notMatch(withoutFloor[0].measured, /ceiling/);
  t.match(renderGenerated(report()), /### The store alone[\s\S]*create 25 %, read 75 %/);
});

t.test("with an estimate in the run, the create's ceiling also counts the request's own work: reference / (estimate + store)", async (t) => {
  const base = report();
  const withEstimate = report({ http: [...base.http, httpRow('estimate', summary(22_000, 40, 0.5), summary(45_000, 20))] });
  t.equal(dutiesAndStoreCeiling(withEstimate.http[0], withEstimate.http[2], 60), 20 / (40 + 60));
  t.equal(dutiesAndStoreCeiling(base.http[0], undefined, 60), null, 'no estimate scenario in the run');
  t.equal(dutiesAndStoreCeiling(withEstimate.http[0], withEstimate.http[2], undefined), null, 'no store floor in the run');
  const [create, read] = checkBudgets(withEstimate);
  t.match(create.measured, /; ceiling 25 % \(the store alone: 60 µs per request\), 20 % with an estimate's work besides \(40 µs\)$/);
  t.notMatch(read.measured, /estimate/, 'the read has no such bound');
  t.match(renderGenerated(withEstimate), /cannot exceed reference \/ \(estimate \+ store\): 20 %\./);
  t.notMatch(renderGenerated(base), /estimate \+ store/, 'said only where the estimate ran');
});

t.test('the HTTP table gives instructions per request where perf counted them, and a dash where it could not', async (t) => {
  const table = renderGenerated(
    report({ http: [httpRow('read', summary(24_000, 42, 0.44, 213.5), summary(55_000, 15, null, 95.1)), httpRow('upload', summary(4, 326_000, 0.04, 2_400_000), summary(98, 12_000))] }),
  );
  t.match(table, /\| read \| 50 \| 24000 \| 5 \| 15 \| 0 \| 0 \| 42 \| 214 \| 55000 \| 15 \| 15 \| 95 \| 44 % \|/);
  t.match(table, /\| upload \| 50 \| 4 \| 5 \| 15 \| 0 \| 0 \| 326 ms \| 2400 M \| 98 \| 15 \| 12 ms \| – \| 4 % \|/);
});

t.test('the create and read budget rows add the ratio by instructions where perf counted them; the verdict stays by requests per second', async (t) => {
  const counted = report({
    http: [httpRow('create', summary(8000, 120, 0.18, 500), summary(45_000, 20, null, 130)), httpRow('read', summary(24_000, 42, 0.72, 253), summary(55_000, 15, null, 131))],
  });
  const [create, read] = checkBudgets(counted);
  t.match(create.measured, /^18 % .*; by instructions 26 % \(500 vs 130 k per request\)$/);
  t.match(read, { met: true, measured: /^72 % .*; by instructions 52 % \(253 vs 131 k per request\)$/ }, 'a read at 72 % by req/s is met though its instructions say 52 %');
  const [uncounted] = checkBudgets(report());
  t.notMatch(uncounted.measured, /instructions/, 'nothing is said where perf could not count');
});

t.test('the 20 MiB upload is met while receiving it grows live Buffers by less than twice the body', async (t) => {
  const row = (l: ReturnType<typeof large>) => checkBudgets(report({ upload: upload(l) })).find((c) => c.budget.includes('streams without buffering'));
  t.match(row(large(0.4)), { met: true, target: /< 2 × the body \(40 MiB\)/ });
  t.match(row(large(39.9)), { met: true }, 'one copy of the body is within the budget');
  t.match(row(large(40.1)), { met: false }, 'two copies are not');
  t.match(row(large(0.4, 201)), { met: false, measured: /statuses 201 and 201/ }, 'the body must be refused, never stored as an image');
});
