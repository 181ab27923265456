import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { LoadSample, Summary } from './load.js';

export interface HttpRow {
  id: string;
  title: string;
  connections: number;
  service: Summary;
  reference: Summary;
  serviceSamples: LoadSample[];
  referenceSamples: LoadSample[];
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  machine: { cpus: number; cpuModel: string; node: string; kernel: string; memoryGiB: number };
  command: string;
  settings: { rounds: number; shortRounds: number; connections: number; warmupSec: number; durationSec: number; runtime: string; sqliteSynchronous: string };
  http: HttpRow[];
  listFlatness: {
    depth: 'first' | 'deep';
    smallTasks: number;
    largeTasks: number;
    /** Median over rounds of rps(large) / rps(small), measured back to back. */
    rpsRatio: number;
    p50Small: number;
    p50Large: number;
    p99Small: number;
    p99Large: number;
  }[];
  upload: {
    uploadBytes: number;
    mbPerSec: number;
    referenceMbPerSec: number;
    concurrent: number;
    concurrentStatuses: Record<string, number>;
    concurrentElapsedSec: number;
    rssBaselineMiB: number;
    rssPeakMiB: number;
    rssGrowthMiB: number;
    peakFrom: string;
    /**
     * DESIGN 5's 20 MiB upload (bench/upload-streaming.ts), one at a time, a GC forced every 2 ms:
     * a body of that size that is not an image (received whole, then refused with 415 before any
     * image work), and a PNG of that size, stored. Growth of live Buffers and of RSS.
     */
    large: {
      received: { bytes: number; status: number; buffersGrowthMiB: number; rssGrowthMiB: number };
      stored: { bytes: number; status: number; buffersGrowthMiB: number; rssGrowthMiB: number };
    };
  } | null;
  /**
   * The store alone (bench/store-floor.ts): µs of the event loop per create and per read, medians
   * over rounds. The service's share of the reference's req/s cannot exceed
   * reference / (reference + store), the reference's figure being its CPU µs per request.
   */
  storeFloor: { rounds: number; createUs: number; readUs: number; createUsPerRound: number[]; readUsPerRound: number[] } | null;
  renderer: { pinnedToOneCpu: boolean; results: { name: string; width: number; height: number; runs: number; best_ms: number; median_ms: number; png_bytes: number }[] } | null;
  e2e: { tasks: number; resolution: string; p50Ms: number; maxMs: number; minMs: number; notCompleted: number } | null;
}

export interface BudgetCheck {
  budget: string;
  target: string;
  measured: string;
  met: boolean | null;
}

/** A list is "flat" when the large store serves at least this share of the small store's rate. */
export const LIST_FLAT_MIN_RATIO = 0.8;

const pct = (r: number | null) => (r === null || Number.isNaN(r) ? '–' : `${(r * 100).toFixed(0)} %`);
const ms = (n: number) => (Number.isInteger(n) ? `${n}` : n.toFixed(1));

/**
 * The most a scenario's ratio can be when the service does the reference's work plus the store's
 * on one thread (BenchReport.storeFloor), or null without both figures.
 */
export function storeCeiling(row: HttpRow | undefined, storeUs: number | undefined): number | null {
  const referenceUs = row?.reference.cpuUsPerRequest;
  if (!referenceUs || storeUs === undefined) return null;
  return referenceUs / (referenceUs + storeUs);
}

/**
 * The most a create's ratio can be when it does, on one thread, an estimate's work (the same body
 * read, validated, authenticated, rate-limited, priced and answered, with nothing created or
 * written: `POST /images/estimates`) and the store's create (BenchReport.storeFloor):
 * reference / (estimate + store), every figure from the same run; null without all three.
 */
export function dutiesAndStoreCeiling(create: HttpRow | undefined, estimate: HttpRow | undefined, storeUs: number | undefined): number | null {
  const referenceUs = create?.reference.cpuUsPerRequest;
  const estimateUs = estimate?.service.cpuUsPerRequest;
  if (!referenceUs || !estimateUs || storeUs === undefined) return null;
  return referenceUs / (estimateUs + storeUs);
}

/** The HTTP scenario of the run with this id, if it ran. */
const rowOf = (report: BenchReport, id: string) => report.http.find((r) => r.id === id);

export function checkBudgets(report: BenchReport): BudgetCheck[] {
  const checks: BudgetCheck[] = [];
  const row = (id: string) => rowOf(report, id);
  const ceilingText = (r: HttpRow | undefined, storeUs: number | undefined) => {
    const ceiling = storeCeiling(r, storeUs);
    return ceiling === null ? '' : `; ceiling ${pct(ceiling)} (the store alone: ${ms(storeUs!)} µs per request)`;
  };
  const createCeilingText = (create: HttpRow) => {
    const text = ceilingText(create, report.storeFloor?.createUs);
    const estimate = row('estimate');
    const withDuties = dutiesAndStoreCeiling(create, estimate, report.storeFloor?.createUs);
    return withDuties === null ? text : `${text}, ${pct(withDuties)} with an estimate's work besides (${ms(estimate!.service.cpuUsPerRequest!)} µs)`;
  };
  // The same ratio by work done: the reference's instructions per request over the service's. Not
  // what the budget is judged by (requests per second), but the figure a noisy machine moves least.
  const instructionsText = (r: HttpRow) => {
    const service = r.service.kiloInstructionsPerRequest;
    const reference = r.reference.kiloInstructionsPerRequest;
    return service && reference ? `; by instructions ${pct(reference / service)} (${service.toFixed(0)} vs ${reference.toFixed(0)} k per request)` : '';
  };
  for (const [id, name] of [
    ['create', 'Create text-to-image (embedded, durable)'],
    ['create-i2i', 'Create image-to-image, 8 references (same budget)'],
    ['create-idem', 'Create text-to-image with an Idempotency-Key (same budget)'],
  ] as const) {
    const r = row(id);
    if (!r) continue;
    const ratio = r.service.ratio ?? 0;
    checks.push({
      budget: name,
      target: `≥ 50 % of reference req/s, p99 ≤ 25 ms at ${r.connections} connections`,
      measured: `${pct(ratio)} (${r.service.rps.toFixed(0)} vs ${r.reference.rps.toFixed(0)} req/s), p99 ${ms(r.service.p99)} ms${r.service.non2xx ? `, ${r.service.non2xx} non-2xx` : ''}${id === 'create' ? createCeilingText(r) : ''}${instructionsText(r)}`,
      met: ratio >= 0.5 && r.service.p99 <= 25 && r.service.non2xx === 0 && r.service.errors === 0,
    });
  }
  const read = row('read');
  if (read) {
    checks.push({
      budget: 'Read a task',
      target: '≥ 70 % of reference req/s',
      measured: `${pct(read.service.ratio)} (${read.service.rps.toFixed(0)} vs ${read.reference.rps.toFixed(0)} req/s), p99 ${ms(read.service.p99)} ms${ceilingText(read, report.storeFloor?.readUs)}${instructionsText(read)}`,
      met: (read.service.ratio ?? 0) >= 0.7 && read.service.non2xx === 0,
    });
  }
  for (const flat of report.listFlatness) {
    checks.push({
      budget: `List, ${flat.depth === 'first' ? 'first page' : 'deep cursor'}: flat from ${count(flat.smallTasks)} to ${count(flat.largeTasks)} tasks`,
      target: `req/s at ${count(flat.largeTasks)} ≥ ${pct(LIST_FLAT_MIN_RATIO)} of req/s at ${count(flat.smallTasks)}`,
      measured: `${pct(flat.rpsRatio)}; p50 ${ms(flat.p50Small)} → ${ms(flat.p50Large)} ms, p99 ${ms(flat.p99Small)} → ${ms(flat.p99Large)} ms`,
      met: flat.rpsRatio >= LIST_FLAT_MIN_RATIO,
    });
  }
  if (report.upload) {
    const u = report.upload;
    const { received, stored } = u.large;
    const bodyMiB = received.bytes / 1024 / 1024;
    const statuses = received.status === 415 && stored.status === 201 ? '' : `, statuses ${received.status} and ${stored.status}`;
    checks.push({
      budget: `Upload: a ${mibText(received.bytes)} image streams without buffering whole request bodies twice`,
      target: `live Buffers while one such body is received grow by < 2 × the body (${(2 * bodyMiB).toFixed(0)} MiB)`,
      measured: `+${received.buffersGrowthMiB} MiB Buffers, +${received.rssGrowthMiB} MiB RSS receiving it; a PNG of that size decoded and stored: +${stored.buffersGrowthMiB} MiB Buffers, +${stored.rssGrowthMiB} MiB RSS${statuses}`,
      met: received.buffersGrowthMiB < 2 * bodyMiB && statuses === '',
    });
    const all201 = Object.keys(u.concurrentStatuses).every((s) => s === '201');
    checks.push({
      budget: `Upload: ${u.concurrent} concurrent ${mibText(u.uploadBytes)} uploads add < 150 MiB RSS`,
      target: '< 150 MiB',
      measured: `+${u.rssGrowthMiB} MiB (${u.rssBaselineMiB} → ${u.rssPeakMiB} MiB)${all201 ? '' : `, statuses ${JSON.stringify(u.concurrentStatuses)}`}`,
      met: u.rssGrowthMiB < 150 && all201,
    });
  }
  if (report.renderer) {
    for (const [name, limit] of [
      ['1K', 150],
      ['4K', 1500],
      ['4K 21:9', 1500],
    ] as const) {
      const r = report.renderer.results.find((x) => x.name === name);
      if (!r) continue;
      checks.push({
        budget: `Local renderer ${name} (${r.width}×${r.height}), one core`,
        target: `< ${limit} ms`,
        measured: `${ms(r.best_ms)} ms best of ${r.runs} (median ${ms(r.median_ms)} ms)`,
        met: r.best_ms < limit,
      });
    }
  }
  return checks;
}

/** What the create's ceiling is once its request's own duties are counted too (the estimate scenario). */
function estimateSentence(report: BenchReport, storeUs: number): string {
  const estimate = rowOf(report, 'estimate');
  const ceiling = dutiesAndStoreCeiling(rowOf(report, 'create'), estimate, storeUs);
  if (ceiling === null) return '';
  return ` A create also does all an estimate does (\`POST /images/estimates\`: the same body read, validated, authenticated, rate-limited, priced and answered, nothing written), ${ms(estimate!.service.cpuUsPerRequest!)} µs of CPU in this run, so it cannot exceed reference / (estimate + store): ${pct(ceiling)}.`;
}

const count = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000} M` : `${n / 1000} k`);
const mibText = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

const BEGIN = '<!-- bench:begin (generated by `npm run bench`; edit outside these markers) -->';
const END = '<!-- bench:end -->';

export function renderGenerated(report: BenchReport): string {
  const m = report.machine;
  const s = report.settings;
  const lines: string[] = [];
  lines.push(`Measured ${report.startedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node.js ${m.node}, Linux ${m.kernel}.`);
  lines.push(`Reproduce: \`${report.command}\` (${s.rounds} alternating rounds per scenario, ${s.shortRounds} for the lists, the estimate and the upload's throughput, ${s.warmupSec} s warm-up + ${s.durationSec} s each; service from \`${s.runtime}\`; SQLite ${s.sqliteSynchronous}).`);
  lines.push('');
  lines.push('### Budgets (DESIGN 5)');
  lines.push('');
  lines.push('| budget | target | measured | |');
  lines.push('|---|---|---|---|');
  for (const c of checkBudgets(report)) lines.push(`| ${c.budget} | ${c.target} | ${c.measured} | ${c.met === null ? '–' : c.met ? '**met**' : '**not met**'} |`);
  lines.push('');
  lines.push('### HTTP scenarios');
  lines.push('');
  lines.push('Medians over the rounds; ratio = median of the per-round ratios service / reference (same round, back to back).');
  lines.push('CPU µs/req = user + system CPU time of the server process during the measured run, per request: it depends much');
  lines.push('less than req/s on what else the machine does, so it is the figure to compare between runs of one machine.');
  lines.push('k instr./req = thousands of instructions the server process retired per request (`perf stat`; – where perf cannot');
  lines.push("count them): it depends far less on the machine's speed than time does (see Method).");
  lines.push('');
  lines.push('| scenario | conn. | req/s | p50 ms | p99 ms | non-2xx | errors | CPU µs/req | k instr./req | reference req/s | reference p99 ms | reference CPU µs/req | reference k instr./req | ratio | per-round ratios |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  const cpu = (us: number | null) => (us === null ? '–' : us >= 10_000 ? `${(us / 1000).toFixed(0)} ms` : us.toFixed(0));
  const instructions = (k: number | null) => (k === null ? '–' : k >= 10_000 ? `${(k / 1000).toFixed(0)} M` : k.toFixed(0));
  for (const r of report.http) {
    lines.push(
      `| ${r.title} | ${r.connections} | ${r.service.rps.toFixed(0)} | ${ms(r.service.p50)} | ${ms(r.service.p99)} | ${r.service.non2xx} | ${r.service.errors} | ${cpu(r.service.cpuUsPerRequest)} | ${instructions(r.service.kiloInstructionsPerRequest)} | ${r.reference.rps.toFixed(0)} | ${ms(r.reference.p99)} | ${cpu(r.reference.cpuUsPerRequest)} | ${instructions(r.reference.kiloInstructionsPerRequest)} | ${pct(r.service.ratio)} | ${r.service.ratios.map((x) => pct(x)).join(', ')} |`,
    );
  }
  if (report.listFlatness.length) {
    lines.push('');
    lines.push('### List: 10 k vs 1 M stored tasks');
    lines.push('');
    lines.push('Both stores run at once (two service processes) and are loaded in alternation with the reference.');
    lines.push('');
    lines.push('| page | req/s large / small | p50 small → large (ms) | p99 small → large (ms) |');
    lines.push('|---|---:|---|---|');
    for (const f of report.listFlatness) {
      lines.push(`| ${f.depth === 'first' ? 'first page' : 'deep cursor (half way down)'} | ${pct(f.rpsRatio)} | ${ms(f.p50Small)} → ${ms(f.p50Large)} | ${ms(f.p99Small)} → ${ms(f.p99Large)} |`);
    }
  }
  if (report.upload) {
    const u = report.upload;
    lines.push('');
    lines.push('### Upload');
    lines.push('');
    lines.push(`- One ${mibText(u.uploadBytes)} PNG (random pixels, so it does not compress) at a time: **${u.mbPerSec.toFixed(1)} MB/s** (the reference, which only reads and drops the body: ${u.referenceMbPerSec.toFixed(0)} MB/s). Every upload is fully decoded, re-encoded without metadata and stored before its 201.`);
    const { received, stored } = u.large;
    lines.push(`- One ${mibText(received.bytes)} body that is not an image, received whole and then refused (${received.status}) before any image work, with a full GC every 2 ms (\`bench/upload-streaming.ts\`): live Buffers **+${received.buffersGrowthMiB} MiB**, RSS +${received.rssGrowthMiB} MiB while it arrived: the part goes to a temporary file as it arrives and no copy of the body is held. One ${mibText(stored.bytes)} PNG of random pixels, decoded, re-encoded and stored (${stored.status}): Buffers +${stored.buffersGrowthMiB} MiB, RSS +${stored.rssGrowthMiB} MiB (libvips' pixels and output, outside the JavaScript heap).`);
    lines.push(`- ${u.concurrent} at once: statuses ${JSON.stringify(u.concurrentStatuses)} in ${u.concurrentElapsedSec.toFixed(1)} s; RSS of the service process ${u.rssBaselineMiB} MiB before, ${u.rssPeakMiB} MiB at peak: **+${u.rssGrowthMiB} MiB** (${u.peakFrom}).`);
  }
  if (report.storeFloor) {
    const f = report.storeFloor;
    lines.push('');
    lines.push('### The store alone');
    lines.push('');
    lines.push(`The event loop's time in the store per request, without HTTP (\`bench/store-floor.ts\`, median of ${f.rounds} rounds): a create (50 clients with an account each, group commit, background checkpointer) **${ms(f.createUs)} µs** (rounds: ${f.createUsPerRound.map(ms).join(', ')}), a read **${ms(f.readUs)} µs** (${f.readUsPerRound.map(ms).join(', ')}). The service does at least the reference's work plus the store's on one thread, so its ratio cannot exceed reference / (reference + store), with the reference's CPU µs per request from the same run: create ${pct(storeCeiling(rowOf(report, 'create'), f.createUs))}, read ${pct(storeCeiling(rowOf(report, 'read'), f.readUs))}.${estimateSentence(report, f.createUs)}`);
  }
  if (report.renderer) {
    lines.push('');
    lines.push(`### Local renderer (one core${report.renderer.pinnedToOneCpu ? ': taskset -c 0, ' : ': '}libvips concurrency 1, UV_THREADPOOL_SIZE=1)`);
    lines.push('');
    lines.push('| image | pixels | best ms | median ms | PNG bytes |');
    lines.push('|---|---|---:|---:|---:|');
    for (const r of report.renderer.results) lines.push(`| ${r.name} | ${r.width}×${r.height} | ${ms(r.best_ms)} | ${ms(r.median_ms)} | ${r.png_bytes} |`);
  }
  if (report.e2e) {
    const e = report.e2e;
    lines.push('');
    lines.push('### End to end');
    lines.push('');
    lines.push(`Create → COMPLETED at light load (one task at a time, \`serve\` with WORKER_CONCURRENCY=1, long-poll \`?wait=30\`), ${e.resolution}, ${e.tasks} tasks: p50 **${ms(e.p50Ms)} ms**, min ${ms(e.minMs)} ms, max ${ms(e.maxMs)} ms${e.notCompleted ? `, ${e.notCompleted} not completed` : ''}.`);
  }
  return lines.join('\n');
}

const SKELETON = `# Benchmarks

\`npm run bench\` measures the service against the budgets of DESIGN section 5 and rewrites the
section between the markers below. Raw results of every run: \`bench/results/\` (not committed).

## Method

- The **reference** is a bare fastify server (\`bench/reference-server.ts\`) on the same routes: the
  create route validates the same \`GenerationRequest\` schema with the same Ajv configuration and
  answers a constant; the read and list routes answer a constant task / page of 20.
- The **service** is \`node dist/src/cli.js serve\` (built first) on the embedded default, in a fresh
  temp \`DATA_DIR\`, with a key made by \`keys create\`; rate limits and the active-task cap are raised
  so they never answer; \`WORKER_CONCURRENCY=0\` for the HTTP scenarios so rendering takes no CPU.
- Reference and service are separate child processes; autocannon runs in the parent. Each
  scenario alternates them (R S R S R S, warm-up before each run) and reports the **median of the
  per-round ratios**, so drift on a noisy machine cancels.

${BEGIN}
${END}

## Optimisations

(hand-written; kept by \`npm run bench\`)
`;

/** Rewrites the generated section of BENCHMARKS.md and keeps everything outside the markers. */
export function writeBenchmarksMd(path: string, report: BenchReport): void {
  const current = existsSync(path) ? readFileSync(path, 'utf8') : SKELETON;
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  const base = start === -1 || end === -1 || end < start ? SKELETON : current;
  const s = base.indexOf(BEGIN);
  const e = base.indexOf(END);
  writeFileSync(path, `${base.slice(0, s + BEGIN.length)}\n${renderGenerated(report)}\n${base.slice(e)}`);
}
