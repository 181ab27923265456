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

/** Whole-ms timestamps make some figures a range: the true value lies in [low, low + 1). */
export interface DispatchResult {
  tasks: number;
  workers: number;
  resolution: string;
  /** The model whose tasks ran on the loopback provider. */
  providerModel: string;
  /** Client's send of the create → the loopback provider has the generator's call: exact (the budget's figure). */
  calledMs: { p50: number; p99: number; max: number };
  /** The same tasks, client's send of the create → its 202. */
  acceptedMs: { p50: number; p99: number; max: number };
  /** The Gemini adapter alone in the bench's process: generate() → the provider has the call. */
  adapterMs: { p50: number; p99: number; max: number };
  /** On the local renderer, client's send of the create → the task's `started_at`: the lower ends (the upper ends are 1 ms more). */
  dispatchFromMs: { p50: number; p99: number; max: number };
  /** `started_at` − `created_at`, both as the service recorded them (whole ms). */
  recordedMs: { p50: number; p99: number; max: number };
  /** Client's send of the create → the long-poll's answer with the task COMPLETED. */
  completedMs: { p50: number; p99: number; max: number };
  notCompleted: number;
}

export interface WakeUps {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface LongPollResult {
  /** The budget's memory: as many waits held by a service without workers (nothing else grows it). */
  held: { waiting: number; rssBaselineMiB: number; rssPeakMiB: number; rssGrowthMiB: number };
  requests: number;
  workers: number;
  /** Most long-polls written to their sockets and not yet answered at one time (client's count, 10 ms samples). */
  heldAtOnce: number;
  sendingSec: number;
  rssBaselineMiB: number;
  /** Peak while the long-polls waited and the workers completed tasks (before the cancels). */
  rssPeakMiB: number;
  rssGrowthMiB: number;
  /** Peak over the whole scenario, the cancels that end the rest at once included. */
  rssPeakWithCancelsMiB: number;
  peakFrom: string;
  /** Answer − `completed_at` (an upper bound) for tasks the workers completed while every long-poll waited. */
  completed: WakeUps;
  /** The same for the tasks canceled through the API afterwards. */
  canceled: WakeUps;
  /**
   * The waiting client's own GC pauses while the workers completed tasks (its process holds only the
   * waits: bench/lib/waiting-client.ts). A wake-up figure near their max may be the client's.
   */
  clientGcPauses: { count: number; maxMs: number; totalMs: number };
  /** By status and task status ("200 COMPLETED"), or the client's error code. */
  statuses: Record<string, number>;
  /** Answers that were not 200 with a task that had ended (errors, timeouts, a wait that ran out). */
  notTerminal: number;
}

export interface DownloadResult {
  bytes: number;
  sha256: string;
  connections: number;
}

export interface BudgetCheck {
  budget: string;
  target: string;
  measured: string;
  /** null: the measurement cannot tell (e.g. within the resolution of a timestamp). */
  met: boolean | null;
}

/**
 * A part of the report that a bench script other than bench/run.ts's own scenarios measured (for
 * instance the scale-out budgets against PostgreSQL): its rows of the budget table, and a section
 * of its own after the others.
 */
export interface ReportSection {
  title: string;
  budgets: BudgetCheck[];
  lines: string[];
  /**
   * Measured on its own (no reference, no other scenario of the run), so a partial run
   * (--only) writes it into BENCHMARKS.md too: its section and budget rows replace theirs.
   */
  standalone?: boolean;
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  machine: {
    cpus: number;
    cpuModel: string;
    node: string;
    kernel: string;
    memoryGiB: number;
    /** 1-minute load average when the run started and when it ended (other work on the machine). */
    loadAverage: { start: number; end: number };
  };
  command: string;
  settings: {
    rounds: number;
    shortRounds: number;
    connections: number;
    warmupSec: number;
    durationSec: number;
    runtime: string;
    sqliteSynchronous: string;
  };
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
    concurrent: number;
    concurrentStatuses: Record<string, number>;
    concurrentElapsedSec: number;
    rssBaselineMiB: number;
    rssPeakMiB: number;
    rssGrowthMiB: number;
    peakFrom: string;
    /**
     * docs/design.md §5's 20 MiB upload (bench/upload-streaming.ts), one at a time, a GC forced every 10 ms:
     * a body of that size that is not an image (received whole, then refused with 415 before any
     * image work), and a PNG of that size, stored. Growth of live Buffers and of RSS.
     */
    large: {
      received: { bytes: number; status: number; buffersGrowthMiB: number; rssGrowthMiB: number };
      stored: { bytes: number; status: number; buffersGrowthMiB: number; rssGrowthMiB: number };
    };
  } | null;
  renderer: {
    pinnedToOneCpu: boolean;
    results: {
      name: string;
      width: number;
      height: number;
      runs: number;
      best_ms: number;
      median_ms: number;
      png_bytes: number;
    }[];
  } | null;
  dispatch: DispatchResult | null;
  longPoll: LongPollResult | null;
  download: DownloadResult | null;
  /** Parts measured by other bench scripts (ReportSection). */
  sections: ReportSection[];
}

/** The waiting client's own GC pauses while the answers were timed. */
export function clientPausesText(l: LongPollResult): string {
  const p = l.clientGcPauses;
  return `its GC paused ${p.count} times in the measured window, ${p.totalMs} ms in all, at most ${p.maxMs} ms`;
}

/** docs/design.md §5's figures, one place. */
export const BUDGETS = {
  createShare: 0.25,
  readShare: 0.2,
  p99Ms: 25,
  dispatchP50Ms: 2,
  dispatchP99Ms: 10,
  longPolls: 5000,
  longPollRssMiB: 200,
  longPollWakeP99Ms: 20,
  downloadShare: 0.7,
  listFlatShare: 0.8,
  concurrentUploadRssMiB: 150,
  /** Capacity at a provider's limit: makespan / N·L/C, 429s / calls, the small accounts' last completion / the run. */
  capacityMakespanRatio: 1.15,
  capacity429Share: 0.1,
  capacitySmallShare: 0.4,
} as const;

const pct = (r: number | null) => (r === null || Number.isNaN(r) ? '–' : `${(r * 100).toFixed(0)} %`);
const ms = (n: number) => (Number.isInteger(n) ? `${n}` : n.toFixed(1));
const count = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000} M` : `${n / 1000} k`);
const mibText = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

export function checkBudgets(report: BenchReport): BudgetCheck[] {
  const checks: BudgetCheck[] = [];
  const row = (id: string) => report.http.find((r) => r.id === id);
  for (const [id, name, share] of [
    ['create', 'Create text-to-image (embedded, durable): guard rail', BUDGETS.createShare],
    ['create-i2i', 'Create image-to-image, 8 references (same guard rail)', BUDGETS.createShare],
    ['create-idem', 'Create with a new Idempotency-Key each (same guard rail)', BUDGETS.createShare],
    ['read', 'Read a task: guard rail', BUDGETS.readShare],
  ] as const) {
    const r = row(id);
    if (!r) continue;
    const ratio = r.service.ratio ?? 0;
    checks.push({
      budget: name,
      target: `≥ ${pct(share)} of the reference's req/s, p99 ≤ ${BUDGETS.p99Ms} ms at ${r.connections} connections`,
      measured: `${pct(ratio)} (${r.service.rps.toFixed(0)} vs ${r.reference.rps.toFixed(0)} req/s), p99 ${ms(r.service.p99)} ms${r.service.non2xx ? `, ${r.service.non2xx} non-2xx` : ''}`,
      met: ratio >= share && r.service.p99 <= BUDGETS.p99Ms && r.service.non2xx === 0 && r.service.errors === 0,
    });
  }
  if (report.dispatch) {
    const d = report.dispatch;
    const { p50, p99 } = d.calledMs;
    checks.push({
      budget: `Dispatch latency, create → generator called, ${d.workers} in-process workers, one task at a time`,
      target: `p50 ≤ ${BUDGETS.dispatchP50Ms} ms, p99 ≤ ${BUDGETS.dispatchP99Ms} ms`,
      measured: `p50 ${ms(p50)} ms, p99 ${ms(p99)} ms to the provider's receipt of the call (${d.tasks} tasks of ${d.providerModel} on a loopback Gemini provider)${d.notCompleted ? `, ${d.notCompleted} not completed` : ''}`,
      met: d.notCompleted === 0 && p50 <= BUDGETS.dispatchP50Ms && p99 <= BUDGETS.dispatchP99Ms,
    });
  }
  if (report.longPoll) {
    const l = report.longPoll;
    const enough = l.heldAtOnce >= BUDGETS.longPolls;
    checks.push({
      budget: `Long-poll: ${count(BUDGETS.longPolls)} concurrent \`?wait=60\` add < ${BUDGETS.longPollRssMiB} MiB RSS`,
      target: `< ${BUDGETS.longPollRssMiB} MiB with ≥ ${BUDGETS.longPolls} waiting at once`,
      measured: `${heldMemoryText(l, 'waiting')}${l.notTerminal ? `, ${l.notTerminal} answers without an ended task` : ''}`,
      met: heldMemoryMet(l) && l.notTerminal === 0,
    });
    checks.push({
      budget: `Long-poll: each returns within ${BUDGETS.longPollWakeP99Ms} ms (p99) of its task's completion`,
      target: `p99 ≤ ${BUDGETS.longPollWakeP99Ms} ms`,
      measured: `p99 ${ms(l.completed.p99Ms)} ms, p50 ${ms(l.completed.p50Ms)} ms, max ${ms(l.completed.maxMs)} ms over ${l.completed.count} tasks completed by the workers while ${enough ? 'all' : 'the'} long-polls waited`,
      met: l.completed.count > 0 && enough && l.completed.p99Ms <= BUDGETS.longPollWakeP99Ms && l.notTerminal === 0,
    });
  }
  const download = row('download');
  if (download && report.download) {
    checks.push({
      budget: `Result download: a 4K PNG (${mibText(report.download.bytes)}) through its signed URL`,
      target: `≥ ${pct(BUDGETS.downloadShare)} of \`@fastify/static\` serving the same file`,
      measured: `${pct(download.service.ratio)} (${download.service.rps.toFixed(0)} vs ${download.reference.rps.toFixed(0)} downloads/s at ${download.connections} connections)${download.service.non2xx ? `, ${download.service.non2xx} non-2xx` : ''}`,
      met:
        (download.service.ratio ?? 0) >= BUDGETS.downloadShare &&
        download.service.non2xx === 0 &&
        download.service.errors === 0,
    });
  }
  for (const flat of report.listFlatness) {
    checks.push({
      budget: `List, ${flat.depth === 'first' ? 'first page' : 'deep cursor'}: flat from ${count(flat.smallTasks)} to ${count(flat.largeTasks)} tasks`,
      target: `req/s at ${count(flat.largeTasks)} ≥ ${pct(BUDGETS.listFlatShare)} of req/s at ${count(flat.smallTasks)}`,
      measured: `${pct(flat.rpsRatio)}; p50 ${ms(flat.p50Small)} → ${ms(flat.p50Large)} ms, p99 ${ms(flat.p99Small)} → ${ms(flat.p99Large)} ms`,
      met: flat.rpsRatio >= BUDGETS.listFlatShare,
    });
  }
  if (report.upload) {
    const u = report.upload;
    const { received, stored } = u.large;
    const bodyMiB = received.bytes / 1024 / 1024;
    const statuses =
      received.status === 415 && stored.status === 201 ? '' : `, statuses ${received.status} and ${stored.status}`;
    checks.push({
      budget: `Upload: a ${mibText(received.bytes)} image streams without buffering whole request bodies twice`,
      target: `live Buffers while one such body is received grow by < 2 × the body (${(2 * bodyMiB).toFixed(0)} MiB)`,
      measured: `+${received.buffersGrowthMiB} MiB Buffers, +${received.rssGrowthMiB} MiB RSS receiving it; a PNG of that size decoded and stored: +${stored.buffersGrowthMiB} MiB Buffers, +${stored.rssGrowthMiB} MiB RSS${statuses}`,
      met: received.buffersGrowthMiB < 2 * bodyMiB && statuses === '',
    });
    const all201 = Object.keys(u.concurrentStatuses).every((s) => s === '201');
    checks.push({
      budget: `Upload: ${u.concurrent} concurrent ${mibText(u.uploadBytes)} uploads (fs adapter)`,
      target: `< ${BUDGETS.concurrentUploadRssMiB} MiB RSS added`,
      measured: `+${u.rssGrowthMiB} MiB (${u.rssBaselineMiB} → ${u.rssPeakMiB} MiB)${all201 ? '' : `, statuses ${JSON.stringify(u.concurrentStatuses)}`}`,
      met: u.rssGrowthMiB < BUDGETS.concurrentUploadRssMiB && all201,
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
  for (const section of report.sections) checks.push(...section.budgets);
  return checks;
}

function budgetRow(c: BudgetCheck): string {
  return `| ${c.budget} | ${c.target} | ${c.measured} | ${c.met === null ? '**undecided**' : c.met ? '**met**' : '**not met**'} |`;
}

const BEGIN = '<!-- bench:begin (generated by `npm run bench`; edit outside these markers) -->';
const END = '<!-- bench:end -->';

export function renderGenerated(report: BenchReport): string {
  const m = report.machine;
  const s = report.settings;
  const lines: string[] = [];
  const heading = (title: string) => lines.push('', `### ${title}`, '');
  const minutes = (Date.parse(report.finishedAt) - Date.parse(report.startedAt)) / 60_000;
  lines.push(
    `Measured ${report.startedAt.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')} on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Node.js ${m.node}, Linux ${m.kernel}; the run took ${minutes.toFixed(1)} min, with a 1-minute load average of ${m.loadAverage.start.toFixed(1)} when it started and ${m.loadAverage.end.toFixed(1)} when it ended (other work shares the machine).`,
  );
  lines.push(
    `Reproduce: \`${report.command}\` (${s.rounds} alternating rounds per ratio, ${s.shortRounds} for the lists, ${s.warmupSec} s warm-up + ${s.durationSec} s each; service from \`${s.runtime}\`; SQLite ${s.sqliteSynchronous}).`,
  );
  heading('Budgets (docs/design.md §5)');
  lines.push('| budget | target | measured | |');
  lines.push('|---|---|---|---|');
  for (const c of checkBudgets(report)) lines.push(budgetRow(c));
  heading('HTTP scenarios');
  lines.push(
    'Medians over the rounds; ratio = median of the per-round ratios service / reference (same round, back to back).',
  );
  lines.push('CPU µs/req = user + system CPU time of the server process during the measured run, per request.');
  lines.push('');
  lines.push(
    '| scenario | conn. | req/s | p50 ms | p99 ms | non-2xx | errors | CPU µs/req | reference req/s | reference p99 ms | reference CPU µs/req | ratio | per-round ratios |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  const cpu = (us: number | null) =>
    us === null ? '–' : us >= 10_000 ? `${(us / 1000).toFixed(0)} ms` : us.toFixed(0);
  for (const r of report.http) {
    lines.push(
      `| ${r.title} | ${r.connections} | ${r.service.rps.toFixed(0)} | ${ms(r.service.p50)} | ${ms(r.service.p99)} | ${r.service.non2xx} | ${r.service.errors} | ${cpu(r.service.cpuUsPerRequest)} | ${r.reference.rps.toFixed(0)} | ${ms(r.reference.p99)} | ${cpu(r.reference.cpuUsPerRequest)} | ${pct(r.service.ratio)} | ${r.service.ratios.map((x) => pct(x)).join(', ')} |`,
    );
  }
  if (report.dispatch) {
    const d = report.dispatch;
    heading('Dispatch latency and end to end');
    lines.push(
      `${d.tasks} tasks of each kind, text-to-image ${d.resolution}, one at a time and alternated, on \`serve\` with ${d.workers} in-process workers. **Timed at the generator's call** (the budget's figure): ${d.providerModel} on the \`gemini\` backend, whose provider is a loopback server in a process of its own; from the client's send of the create to the provider's receipt of the whole call, on the machine's wall clock (sub-ms): p50 **${ms(d.calledMs.p50)} ms**, p99 **${ms(d.calledMs.p99)} ms**, max ${ms(d.calledMs.max)} ms. This counts the Gemini adapter building its request and the request's trip besides the dispatch: the same adapter, called alone in the bench's process, has its call at the provider p50 ${ms(d.adapterMs.p50)} ms, p99 ${ms(d.adapterMs.p99)} ms after \`generate()\`. The client had its 202 after p50 ${ms(d.acceptedMs.p50)} ms, p99 ${ms(d.acceptedMs.p99)} ms. **On the local renderer** (alpha-pro): from the send to the task's \`started_at\`, which the worker reads as its claim begins (the claim and the attempt's set-up, about 0.5 ms, come after it, so this is a lower bound, and \`started_at\` has whole milliseconds): p50 ${ms(d.dispatchFromMs.p50)}–${ms(d.dispatchFromMs.p50 + 1)} ms, p99 ${ms(d.dispatchFromMs.p99)}–${ms(d.dispatchFromMs.p99 + 1)} ms, max ${ms(d.dispatchFromMs.max)}–${ms(d.dispatchFromMs.max + 1)} ms. As the service recorded it, \`started_at\` − \`created_at\`: p50 ${d.recordedMs.p50} ms, p99 ${d.recordedMs.p99} ms, max ${d.recordedMs.max} ms. Create → the long-poll's answer with the task COMPLETED (the 1K render included): p50 ${ms(d.completedMs.p50)} ms, p99 ${ms(d.completedMs.p99)} ms, max ${ms(d.completedMs.max)} ms${d.notCompleted ? `; ${d.notCompleted} not completed` : ''}.`,
    );
  }
  if (report.longPoll) {
    const l = report.longPoll;
    heading('Long-poll');
    lines.push(
      `Memory, judged on ${l.held.waiting} long-polls waiting at once on a service without workers (nothing else grows it): RSS ${l.held.rssBaselineMiB} → ${l.held.rssPeakMiB} MiB, **+${l.held.rssGrowthMiB} MiB**. Then, with workers: ${l.requests} tasks, one \`GET …?wait=60\` each on a socket of its own (undici, in a process that holds only these: ${clientPausesText(l)}), all held by the service (its \`imagegen_task_waits\`) ${l.sendingSec} s after the first was sent; **${l.heldAtOnce} waiting at once**. RSS of the service ${l.rssBaselineMiB} MiB before the first, ${l.rssPeakMiB} MiB at peak while they waited: +${l.rssGrowthMiB} MiB (${l.peakFrom}; ${l.workers} in-process workers rendering meanwhile, and rendering alone grows the process); ${l.rssPeakWithCancelsMiB} MiB at peak once the cancels that end the rest at once are counted too. Answer − \`completed_at\` (whole ms, so an upper bound) for the ${l.completed.count} tasks the workers completed from then until the cancels below began: p50 ${ms(l.completed.p50Ms)} ms, **p99 ${ms(l.completed.p99Ms)} ms**, max ${ms(l.completed.maxMs)} ms. The ${l.canceled.count} tasks still waiting after that were canceled through the API (rendering them all would take minutes): p50 ${ms(l.canceled.p50Ms)} ms, p99 ${ms(l.canceled.p99Ms)} ms, max ${ms(l.canceled.maxMs)} ms from the cancel to the answer. Answers: ${JSON.stringify(l.statuses)}.`,
    );
  }
  const download = report.http.find((r) => r.id === 'download');
  if (report.download && download) {
    const mb = (samples: LoadSample[]) =>
      (samples.map((x) => x.receivedBytesPerSec).sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? 0) / 1e6;
    heading('Result download');
    lines.push(
      `One 4K PNG made by the local renderer (${report.download.bytes} bytes, sha256 \`${report.download.sha256.slice(0, 16)}…\`), ${report.download.connections} connections: through its signed URL ${download.service.rps.toFixed(0)} downloads/s (${mb(download.serviceSamples).toFixed(0)} MB/s), \`@fastify/static\` serving the same file ${download.reference.rps.toFixed(0)}/s (${mb(download.referenceSamples).toFixed(0)} MB/s): **${pct(download.service.ratio)}**.`,
    );
  }
  if (report.listFlatness.length) {
    heading('List: 10 k vs 1 M stored tasks');
    lines.push('Both stores run at once (two service processes) and are loaded in alternation with the reference.');
    lines.push('');
    lines.push('| page | req/s large / small | p50 small → large (ms) | p99 small → large (ms) |');
    lines.push('|---|---:|---|---|');
    for (const f of report.listFlatness) {
      lines.push(
        `| ${f.depth === 'first' ? 'first page' : 'deep cursor (half way down)'} | ${pct(f.rpsRatio)} | ${ms(f.p50Small)} → ${ms(f.p50Large)} | ${ms(f.p99Small)} → ${ms(f.p99Large)} |`,
      );
    }
  }
  if (report.upload) {
    const u = report.upload;
    heading('Upload');
    const { received, stored } = u.large;
    lines.push(
      `- One ${mibText(received.bytes)} body that is not an image, received whole and then refused (${received.status}) before any image work, with a full GC every 10 ms (\`bench/upload-streaming.ts\`): live Buffers **+${received.buffersGrowthMiB} MiB**, RSS +${received.rssGrowthMiB} MiB while it arrived: the part goes to a temporary file as it arrives and no copy of the body is held. One ${mibText(stored.bytes)} PNG of random pixels, decoded, re-encoded and stored (${stored.status}): Buffers +${stored.buffersGrowthMiB} MiB, RSS +${stored.rssGrowthMiB} MiB (libvips' pixels and output, outside the JavaScript heap).`,
    );
    lines.push(
      `- ${u.concurrent} at once: statuses ${JSON.stringify(u.concurrentStatuses)} in ${u.concurrentElapsedSec.toFixed(1)} s; RSS of the service process ${u.rssBaselineMiB} MiB before, ${u.rssPeakMiB} MiB at peak: **+${u.rssGrowthMiB} MiB** (${u.peakFrom}).`,
    );
  }
  if (report.renderer) {
    heading(
      `Local renderer (one core${report.renderer.pinnedToOneCpu ? ': taskset -c 0, ' : ': '}libvips concurrency 1, UV_THREADPOOL_SIZE=1)`,
    );
    lines.push('| image | pixels | best ms | median ms | PNG bytes |');
    lines.push('|---|---|---:|---:|---:|');
    for (const r of report.renderer.results)
      lines.push(`| ${r.name} | ${r.width}×${r.height} | ${ms(r.best_ms)} | ${ms(r.median_ms)} | ${r.png_bytes} |`);
  }
  for (const section of report.sections) {
    heading(section.title);
    lines.push(...section.lines);
  }
  return lines.join('\n');
}

const SKELETON = `# Benchmarks

\`npm run bench\` measures the service against the budgets of docs/design.md §5 and rewrites the
section between the markers below. Raw results of every run: \`bench/results/\` (not committed).

${BEGIN}
${END}
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

/**
 * A partial run's standalone sections into BENCHMARKS.md's generated part, leaving every other
 * line as it is: each section replaces the one of the same title (or is added at the end), and
 * each of its budget rows replaces the row of the same budget (or is added to the Budgets table).
 */
export function mergeStandaloneSections(path: string, sections: readonly ReportSection[]): void {
  const current = readFileSync(path, 'utf8');
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  if (start === -1 || end === -1 || end < start) throw new Error(`${path} has no generated part to merge into`);
  let lines = current.slice(start + BEGIN.length, end).split('\n');
  for (const section of sections) {
    for (const check of section.budgets) {
      const row = budgetRow(check);
      const at = lines.findIndex((line) => line.startsWith(`| ${check.budget} |`));
      if (at !== -1) {
        lines[at] = row;
        continue;
      }
      const header = lines.findIndex((line) => line.startsWith('| budget | target | measured |'));
      if (header === -1) throw new Error(`${path} has no Budgets table`);
      let last = header + 1;
      while (lines[last + 1]?.startsWith('|')) last++;
      lines.splice(last + 1, 0, row);
    }
    const block = ['', `### ${section.title}`, '', ...section.lines];
    const heading = lines.indexOf(`### ${section.title}`);
    if (heading === -1) {
      while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
      lines = [...lines, ...block, ''];
      continue;
    }
    let next = lines.findIndex((line, i) => i > heading && line.startsWith('### '));
    if (next === -1) next = lines.length;
    while (next > heading && lines[next - 1] === '') next--;
    lines.splice(heading - 1, next - heading + 1, ...block);
  }
  writeFileSync(path, `${current.slice(0, start + BEGIN.length)}${lines.join('\n')}${current.slice(end)}`);
}

/** The waits' memory as the budget judges it (LongPollResult.held), beside the run's growth with workers rendering. */
export function heldMemoryText(l: LongPollResult, held: 'waiting' | 'open'): string {
  return (
    `+${l.held.rssGrowthMiB} MiB (${l.held.rssBaselineMiB} → ${l.held.rssPeakMiB} MiB) with ${l.held.waiting} ${held} at once ` +
    `on a service without workers; +${l.rssGrowthMiB} MiB in the run with ${l.workers} workers rendering meanwhile`
  );
}

/** Whether the waits' memory meets the budget: enough of them held at once, and less than the budget added. */
export function heldMemoryMet(l: LongPollResult): boolean {
  return l.held.waiting >= BUDGETS.longPolls && l.held.rssGrowthMiB < BUDGETS.longPollRssMiB;
}
