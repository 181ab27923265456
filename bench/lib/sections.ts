import type { ScaleOutRow } from '../scale-out.js';
import type { StoreCreateReport } from '../store-create.js';
import type { CapacityResult } from '../scenarios/capacity.js';
import type { PhotoUploadReport } from '../upload-memory-photos.js';
import {
  BUDGETS,
  clientPausesText,
  heldMemoryMet,
  heldMemoryText,
  type BudgetCheck,
  type HttpRow,
  type LongPollResult,
  type ReportSection,
} from './report.js';

/**
 * How far the create's ratio to the bare reference can rise on this machine at most: the embedded
 * store's write of a create alone (bench/store-create.ts) beside the create scenario's CPU figures
 * of the same run. No budget of its own: the figure the create's budget is read against.
 */
export function createCeilingSection(store: StoreCreateReport, create: HttpRow): ReportSection {
  const reference = create.reference.cpuUsPerRequest;
  const service = create.service.cpuUsPerRequest;
  const storeUs = store.cpu_us_per_create;
  const lines = [
    `\`bench/store-create.ts\`: the core's task made of the create scenario's body and the embedded store's`,
    `write and charge of it (\`insertTaskWithDebit\`: the task row, the ledger's debit, the account; one`,
    `synced commit per group), with no HTTP around it. ${store.connections} accounts, each with one create at a time, as the`,
    `scenario's ${store.connections} connections, so that the group commit batches alike; checkpoints on a thread of their own, as`,
    `\`serve\` runs them: **${storeUs} µs of CPU per create** (median of ${store.rounds.length} rounds of ${store.creates_per_round}:`,
    `${store.rounds.map((r) => r.cpu_us_per_create).join(', ')} µs), ${store.creates_per_sec} creates/s on one thread.`,
  ];
  if (reference !== null && service !== null) {
    const ceiling = reference / (reference + storeUs);
    // The store's figure has a decimal: the difference rounded as it is, not as floating point leaves it.
    const rest = Math.round((service - storeUs) * 10) / 10;
    lines.push(
      '',
      `In the same run the bare fastify reference spent ${reference} µs of CPU per create and the service ${service} µs.`,
      `A service whose every step but this write cost no more than the whole bare reference would reach`,
      `${reference} / (${reference} + ${storeUs}) = **${Math.round(ceiling * 100)} %** of the reference's creates/s, against the budget's`,
      `${Math.round(BUDGETS.createShare * 100)} %. The rest of the service's create (authentication, rate limits, validation, the`,
      `task's price and signed \`stream_url\`, its answer, logs and metrics) is ${service} − ${storeUs} = ${rest} µs,`,
      `${(rest / reference).toFixed(1)} × the reference's whole request.`,
    );
  }
  return { title: "The create's ceiling: the store's write alone", budgets: [], lines };
}

/** docs/design.md §5's upload row for real photos (decision 0012): growth at the peak, and RSS a minute later. */
export function photoUploadSection(report: PhotoUploadReport): ReportSection {
  const { budget } = report;
  const budgets: BudgetCheck[] = report.bursts.map((b) => ({
    budget: `Upload: ${report.uploads_per_burst} concurrent ${b.fixture} (${(b.upload_bytes / 2 ** 20).toFixed(1)} MiB)`,
    target: `< ${budget.peak_growth_mib} MiB RSS growth; ≤ ${budget.after_settle_vs_baseline_at_most} × baseline a minute later`,
    measured: `+${b.rss_growth_mib} MiB (${b.rss_baseline_mib} → ${b.rss_peak_mib} MiB), ${b.after_settle_vs_baseline} × a minute later`,
    met: b.within_budget,
  }));
  const lines = [
    `\`bench/upload-memory-photos.ts\`: the app in the measuring process over loopback, ${report.uploads_per_burst} uploads at`,
    `once per burst, \`UPLOAD_DECODE_CONCURRENCY\` ${report.decode_concurrency}, allocator`,
    `\`MALLOC_MMAP_THRESHOLD_=${report.allocator.MALLOC_MMAP_THRESHOLD_} MALLOC_ARENA_MAX=${report.allocator.MALLOC_ARENA_MAX}\``,
    `(as \`npm start\` sets them), RSS read ${report.settle_ms / 1000} s after each burst.`,
    '',
    '| burst | statuses | time | RSS baseline → peak | growth | a minute later |',
    '|---|---|---|---|---|---|',
    ...report.bursts.map(
      (b) =>
        `| ${b.fixture} | ${b.statuses.join(', ')} | ${(b.elapsed_ms / 1000).toFixed(1)} s | ` +
        `${b.rss_baseline_mib} → ${b.rss_peak_mib} MiB | **+${b.rss_growth_mib} MiB** | ` +
        `${b.rss_after_settle_mib} MiB, ${b.after_settle_vs_baseline} × |`,
    ),
  ];
  return { title: 'Upload memory with real photos', budgets, lines };
}

/**
 * docs/design.md §5's waiting rows for event streams: the long-poll scenario with one open
 * `GET …/{task_id}/events` per task instead of `?wait=60`, judged by the long-poll's budgets.
 */
export function eventStreamSection(l: LongPollResult): ReportSection {
  const enough = l.heldAtOnce >= BUDGETS.longPolls;
  const cleanEnd = l.notTerminal === 0;
  return {
    title: 'Event streams',
    budgets: [
      {
        budget: `Event streams: ${BUDGETS.longPolls} concurrent streams add < ${BUDGETS.longPollRssMiB} MiB RSS`,
        target: `< ${BUDGETS.longPollRssMiB} MiB with ≥ ${BUDGETS.longPolls} open at once`,
        measured: heldMemoryText(l, 'open'),
        met: cleanEnd && heldMemoryMet(l),
      },
      {
        budget: `Event streams: each sees its task's completion within ${BUDGETS.longPollWakeP99Ms} ms (p99)`,
        target: `p99 ≤ ${BUDGETS.longPollWakeP99Ms} ms`,
        measured: `p99 ${l.completed.p99Ms} ms (p50 ${l.completed.p50Ms} ms, ${l.completed.count} completions)`,
        met: enough && cleanEnd && l.completed.count > 0 && l.completed.p99Ms <= BUDGETS.longPollWakeP99Ms,
      },
    ],
    lines: [
      `\`bench/scenarios/long-poll.ts\` with \`via: 'event-stream'\`: ${l.requests} tasks, one \`GET …/events\` each on a socket of its own (undici, in a process that holds only these: ${clientPausesText(l)}), all held by the service (its \`imagegen_task_waits\`) ${l.sendingSec} s after the first was sent; ${l.heldAtOnce} open at once; ${l.workers} in-process workers rendering meanwhile.`,
      `Memory judged on ${l.held.waiting} streams open at once on a service without workers (nothing else grows it): RSS ${l.held.rssBaselineMiB} → ${l.held.rssPeakMiB} MiB, **+${l.held.rssGrowthMiB} MiB**. In the run with workers rendering: RSS ${l.rssBaselineMiB} → ${l.rssPeakMiB} MiB (${l.peakFrom}); with the cancels that end the rest, ${l.rssPeakWithCancelsMiB} MiB.`,
      `Terminal \`task\` event parsed − \`completed_at\` for ${l.completed.count} completions: p50 ${l.completed.p50Ms} ms, p99 ${l.completed.p99Ms} ms, max ${l.completed.maxMs} ms; canceled: p99 ${l.canceled.p99Ms} ms. Answers: ${JSON.stringify(l.statuses)}.`,
    ],
  };
}

/** 10 concurrent 10 MiB uploads into a service whose blobs are in S3 (bench/run.ts, upload-s3). */
export interface S3UploadReport {
  uploadBytes: number;
  concurrent: number;
  statuses: Record<string, number>;
  elapsedSec: number;
  rssBaselineMiB: number;
  rssPeakMiB: number;
  rssGrowthMiB: number;
  budgetMiB: number;
}

/** docs/design.md §5's upload row on the S3 adapter: met when every upload is stored and RSS grows less than the budget. */
export function s3UploadSection(report: S3UploadReport): ReportSection {
  const all201 = Object.keys(report.statuses).every((status) => status === '201');
  const size = `${(report.uploadBytes / 2 ** 20).toFixed(1)} MiB`;
  return {
    title: 'Upload memory on the S3 adapter',
    budgets: [
      {
        budget: `Upload: ${report.concurrent} concurrent ${size} uploads (S3 adapter)`,
        target: `< ${report.budgetMiB} MiB RSS added`,
        measured: `+${report.rssGrowthMiB} MiB (${report.rssBaselineMiB} → ${report.rssPeakMiB} MiB)${all201 ? '' : `, statuses ${JSON.stringify(report.statuses)}`}`,
        met: all201 && report.rssGrowthMiB < report.budgetMiB,
      },
    ],
    lines: [
      `\`BLOB_STORE=s3\` against s3rver on loopback, in a process of its own (its memory is not counted): ${report.concurrent}`,
      `random-pixel PNGs of ${size} at once into \`serve\`, each decoded, re-encoded and put with lib-storage`,
      `(5 MiB parts, 2 in flight per put), in ${report.elapsedSec.toFixed(1)} s; RSS ${report.rssBaselineMiB} → ${report.rssPeakMiB} MiB.`,
    ],
  };
}

/**
 * The scale-out rows (bench/scale-out.ts) judged against docs/design.md §5: a row with a budget is met when
 * its ratio (above 1 = ours better) reaches the budget's factor (the "≥ F ×" it names, else 1, or
 * 80 % for a list at 1 M against 10 k), or, for the dispatch p99, when it is within 25 ms.
 */
export function scaleOutSection(rows: ScaleOutRow[]): ReportSection {
  const verdict = (row: ScaleOutRow): boolean | null => {
    if (row.budget.startsWith('p99 ≤ 25 ms')) return row.ours <= 25;
    if (row.ratio === null) return null;
    if (row.budget.includes('≥ 80 %')) return row.ratio >= 0.8;
    const factor = /≥ (\d+(?:\.\d+)?) ×/.exec(row.budget);
    return row.ratio >= (factor ? Number(factor[1]) : 1);
  };
  const budgets: BudgetCheck[] = rows
    .filter((row) => row.budget !== '')
    .map((row) => ({
      budget: `Scale-out (PostgreSQL): ${row.scenario}`,
      target: row.budget,
      measured: `${row.ours} ${row.unit}${row.reference === null ? '' : ` vs ${row.reference}`}`,
      met: verdict(row),
    }));
  const lines = [
    "On the machine's PostgreSQL, beside graphile-worker 0.18 on the same database in the same run (`bench/scale-out.ts`).",
    '',
    '| scenario | ours | graphile-worker / reference | ratio (> 1 = ours better) | budget |',
    '|---|---|---|---|---|',
    ...rows.map(
      (r) => `| ${r.scenario} | ${r.ours} ${r.unit} | ${r.reference ?? '–'} | ${r.ratio ?? '–'} | ${r.budget} |`,
    ),
  ];
  return { title: 'Scale-out on PostgreSQL', budgets, lines };
}

/**
 * docs/design.md §5's capacity rows (bench/scenarios/capacity.ts), per setup: makespan against the provider's
 * own limit N·L/C, the provider's 429 share, the small accounts' last completion as a share of the
 * run, and the tasks that did not complete.
 */
export function capacitySection(results: CapacityResult[]): ReportSection {
  const pct = (share: number) => `${(share * 100).toFixed(1)} %`;
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const budgets: BudgetCheck[] = results.flatMap((r) => [
    {
      budget: `Capacity at a provider's limit, ${r.setup}: makespan`,
      target: `≤ ${BUDGETS.capacityMakespanRatio} × N·L/C`,
      measured: `${r.makespanRatio.toFixed(2)} × (${s(r.makespanMs)} against ${s(r.providerLimitMs)})`,
      met: r.makespanRatio <= BUDGETS.capacityMakespanRatio,
    },
    {
      budget: `Capacity at a provider's limit, ${r.setup}: 429s`,
      target: `≤ ${BUDGETS.capacity429Share * 100} % of the provider's calls`,
      measured: `${pct(r.share429)} (${r.rateLimited} of ${r.calls} calls; at most ${r.peakInFlight} in flight)`,
      met: r.share429 <= BUDGETS.capacity429Share,
    },
    {
      budget: `Capacity at a provider's limit, ${r.setup}: the small accounts' worst wait`,
      target: `their last task done within ${BUDGETS.capacitySmallShare * 100} % of the run`,
      measured: `${pct(r.smallWorstShare)} (${s(r.smallWorstMs)} of ${s(r.makespanMs)})`,
      met: r.smallWorstShare <= BUDGETS.capacitySmallShare,
    },
    {
      budget: `Capacity at a provider's limit, ${r.setup}: tasks not completed`,
      target: '0',
      measured: `${r.notCompleted} of ${r.tasks} (${JSON.stringify(r.byStatus)}${Object.keys(r.refusedCreates).length ? `, creates refused ${JSON.stringify(r.refusedCreates)}` : ''})`,
      met: r.notCompleted === 0,
    },
  ]);
  const first = results[0];
  const lines = [
    `A loopback provider (\`test/helpers/capacity-provider.ts\`) that serves ${first?.capacity} calls at once, ${first?.latencyMs} ms each,`,
    "and answers any call beyond that at once with Gemini's 429 `RESOURCE_EXHAUSTED` and a `RetryInfo` of 1 s;",
    `\`alpha-pro\` on \`gemini\`. ${first?.tasks} tasks: one account creates ${first?.burstTasks} at once, then ${first?.smallAccounts} other accounts`,
    `${first?.smallTasks} each; every task long-polled until it ends. The service runs with its defaults for everything that`,
    "decides capacity. Makespan: the first create sent → the last task's `completed_at`; N·L/C is the provider's own limit.",
    '',
    "Provider busy: calls answered × L over C × makespan. After the answer: the provider's image → the task's `completed_at`.",
    '',
    '| setup | makespan | N·L/C | ratio | calls | 429s | peak in flight | provider busy | after the answer p50 / max | small accounts done at | statuses |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...results.map(
      (r) =>
        `| ${r.setup} | ${s(r.makespanMs)} | ${s(r.providerLimitMs)} | ${r.makespanRatio.toFixed(2)} | ${r.calls} | ${r.rateLimited} (${pct(r.share429)}) | ${r.peakInFlight} | ${pct(r.utilisation)} | ${r.afterAnswerMs.p50} / ${r.afterAnswerMs.max} ms | ${s(r.smallWorstMs)} (${pct(r.smallWorstShare)}) | ${JSON.stringify(r.byStatus)} |`,
    ),
  ];
  return { title: "Capacity at a provider's limit", budgets, lines };
}

/** bench/output-formats.ts's report: one row per 4K image, its bytes and encode time per format. */
export interface OutputFormatsReport {
  compression: number;
  results: {
    name: string;
    width: number;
    height: number;
    prompt: string;
    png_bytes: number;
    jpeg_bytes: number;
    webp_bytes: number;
    png_ms: number;
    jpeg_ms: number;
    webp_ms: number;
  }[];
}

/** Decision 0024's row: a 4K WebP result is at most a fifth of the PNG's bytes (decision 0024). */
export function outputFormatsSection(report: OutputFormatsReport): ReportSection {
  const share = (bytes: number, png: number) => `${((bytes / png) * 100).toFixed(1)} %`;
  const worst = Math.max(...report.results.map((r) => r.webp_bytes / r.png_bytes));
  return {
    title: `Output formats: the local renderer's 4K results (jpeg and webp at output_compression ${report.compression})`,
    standalone: true,
    budgets: [
      {
        budget: "Output formats: a 4K WebP result is at most a fifth of the PNG's bytes",
        target: '≤ 20 % of the PNG',
        measured: report.results
          .map((r) => `${r.name}: ${share(r.webp_bytes, r.png_bytes)} (${r.webp_bytes} vs ${r.png_bytes} bytes)`)
          .join('; '),
        met: worst <= 0.2,
      },
    ],
    lines: [
      `\`bench/output-formats.ts\`: the same rendered picture stored as each format, as the worker stores it, one core (libvips concurrency 1); encode time includes the render. The renderer draws gradients and shapes, which compress far better than a photograph or a model's image: the ratios, not the bytes, are what carry over.`,
      '',
      '| image | PNG bytes | JPEG bytes | WebP bytes | JPEG / PNG | WebP / PNG | PNG ms | JPEG ms | WebP ms |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...report.results.map(
        (r) =>
          `| ${r.name} (${r.width}×${r.height}) | ${r.png_bytes} | ${r.jpeg_bytes} | ${r.webp_bytes} | ${share(r.jpeg_bytes, r.png_bytes)} | ${share(r.webp_bytes, r.png_bytes)} | ${r.png_ms} | ${r.jpeg_ms} | ${r.webp_ms} |`,
      ),
    ],
  };
}
