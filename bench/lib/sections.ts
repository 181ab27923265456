import type { ScaleOutRow } from '../scale-out.js';
import type { PhotoUploadReport } from '../upload-memory-photos.js';
import type { BudgetCheck, ReportSection } from './report.js';

/** DESIGN 5's upload row for real photos (issue 24): growth at the peak, and RSS a minute later. */
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

/** DESIGN 5's upload row on the S3 adapter: met when every upload is stored and RSS grows less than the budget. */
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
 * The scale-out rows (bench/scale-out.ts) judged against DESIGN 5: a row with a budget is met when
 * its ratio (above 1 = ours better) reaches the budget's factor (1, 1.3 ×, or 80 % for a list at
 * 1 M against 10 k), or, for the dispatch p99, when it is within 25 ms.
 */
export function scaleOutSection(rows: ScaleOutRow[]): ReportSection {
  const verdict = (row: ScaleOutRow): boolean | null => {
    if (row.budget.startsWith('p99 ≤ 25 ms')) return row.ours <= 25;
    if (row.ratio === null) return null;
    if (row.budget.includes('≥ 80 %')) return row.ratio >= 0.8;
    return row.ratio >= (row.budget.includes('1.3 ×') ? 1.3 : 1);
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
    "On the machine's PostgreSQL, beside graphile-worker 0.16 on the same database in the same run (`bench/scale-out.ts`).",
    '',
    '| scenario | ours | graphile-worker / reference | ratio (> 1 = ours better) | budget |',
    '|---|---|---|---|---|',
    ...rows.map(
      (r) => `| ${r.scenario} | ${r.ours} ${r.unit} | ${r.reference ?? '–'} | ${r.ratio ?? '–'} | ${r.budget} |`,
    ),
  ];
  return { title: 'Scale-out on PostgreSQL', budgets, lines };
}
