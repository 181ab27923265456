/**
 * Usage charts of the console and the Playground (decision 0037): the rows of GET /admin/v1/usage
 * or GET /api/v1/usage grouped by day and model, drawn by Chart.js as bars stacked by model, one
 * bar a day with the days that have no row drawn as zero. Only the pieces a bar chart needs are
 * registered, so esbuild leaves the rest of Chart.js out. Each chart's numbers are also a table
 * (in a <details> under it), for screen readers and for reading exact values.
 */
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import type { paths } from '../clients/typescript/index.js';
import { el } from './dom.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);
Chart.defaults.font.family = 'system-ui, sans-serif';
Chart.defaults.color = '#1a1a1a';
// Drawn at once: nothing to wait for before a screenshot, nothing moving for people who asked for less motion.
Chart.defaults.animation = false;

export type UsageRow = paths['/admin/v1/usage']['get']['responses'][200]['content']['application/json']['data'][number];
export type UsageMetric = 'tasks' | 'images' | 'tokens_charged' | 'tokens_refunded' | 'failed' | 'canceled';

export const USAGE_METRICS: Record<UsageMetric, string> = {
  tasks: 'Tasks',
  images: 'Images',
  tokens_charged: 'Tokens charged',
  tokens_refunded: 'Tokens refunded',
  failed: 'Failed',
  canceled: 'Canceled',
};

/** Distinct on white, and told apart by people with the common colour-vision deficiencies (Okabe–Ito). */
const PALETTE = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00', '#f0e442', '#000000'];

/** The `days` UTC days up to and including today's, oldest first, as the usage API's `from`/`to` take them. */
export function lastDays(days: number, now = new Date()): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: days }, (_, i) =>
    new Date(today - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10),
  );
}

/** One series per model (in name order): the metric on each day, 0 where the API had no row. */
export function usageSeries(
  rows: readonly UsageRow[],
  days: readonly string[],
  metric: UsageMetric,
): { model: string; values: number[] }[] {
  const models = [...new Set(rows.map((row) => row.model ?? 'all'))].sort();
  const index = new Map(days.map((day, i) => [day, i]));
  return models.map((model) => {
    const values = days.map(() => 0);
    for (const row of rows) {
      const at = row.day === undefined ? undefined : index.get(row.day);
      if ((row.model ?? 'all') === model && at !== undefined) values[at] += row[metric];
    }
    return { model, values };
  });
}

/** The metrics summed per model over the rows, and over all of them. */
export function usageTotals(rows: readonly UsageRow[]): { model: string; totals: Record<UsageMetric, number> }[] {
  const zero = (): Record<UsageMetric, number> => ({
    tasks: 0,
    images: 0,
    tokens_charged: 0,
    tokens_refunded: 0,
    failed: 0,
    canceled: 0,
  });
  const byModel = new Map<string, Record<UsageMetric, number>>();
  const all = zero();
  for (const row of rows) {
    const model = row.model ?? 'all';
    const totals = byModel.get(model) ?? zero();
    byModel.set(model, totals);
    for (const metric of Object.keys(USAGE_METRICS) as UsageMetric[]) {
      totals[metric] += row[metric];
      all[metric] += row[metric];
    }
  }
  return [
    ...[...byModel.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([model, totals]) => ({ model, totals })),
    { model: 'All models', totals: all },
  ];
}

/** A table of numbers: a caption, a header row, a row each with its header cell, and an optional footer row. */
function numbersTable(
  className: string,
  caption: string,
  columns: readonly string[],
  rows: readonly (readonly [string, readonly number[]])[],
  footer?: readonly [string, readonly number[]],
): HTMLTableElement {
  const line = ([head, values]: readonly [string, readonly number[]]) =>
    el(
      'tr',
      {},
      el('th', { scope: 'row', textContent: head }),
      ...values.map((value) => el('td', { className: 'number', textContent: String(value) })),
    );
  const [first, ...rest] = columns;
  return el(
    'table',
    { className: `data ${className}` },
    el('caption', { textContent: caption }),
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { scope: 'col', textContent: first }),
        ...rest.map((column) => el('th', { scope: 'col', className: 'number', textContent: column })),
      ),
    ),
    el('tbody', {}, ...rows.map(line)),
    ...(footer ? [el('tfoot', {}, line(footer))] : []),
  );
}

/** A table of the totals per model (the last row: all models), with its caption. */
export function usageTotalsTable(rows: readonly UsageRow[], caption: string): HTMLTableElement {
  const metrics = Object.keys(USAGE_METRICS) as UsageMetric[];
  const totals = usageTotals(rows).map(({ model, totals: values }) => [model, metrics.map((m) => values[m])] as const);
  return numbersTable(
    'usage-totals',
    caption,
    ['Model', ...metrics.map((metric) => USAGE_METRICS[metric])],
    totals.slice(0, -1),
    totals[totals.length - 1],
  );
}

/**
 * `container`'s chart of one metric per day, stacked by model: a figure with its caption, the
 * canvas (an image to assistive technology, named by the caption) and the same numbers as a table.
 * A chart drawn there before is destroyed first.
 */
export function drawUsageChart(
  container: HTMLElement,
  rows: readonly UsageRow[],
  days: readonly string[],
  metric: UsageMetric,
): Chart<'bar'> {
  for (const canvas of container.querySelectorAll('canvas')) Chart.getChart(canvas)?.destroy();
  const title = `${USAGE_METRICS[metric]} per day and model`;
  const series = usageSeries(rows, days, metric);
  const total = series.reduce((sum, s) => sum + s.values.reduce((a, b) => a + b, 0), 0);
  const canvas = el('canvas', {
    role: 'img',
    ariaLabel: `${title}: ${total} in all; the numbers are in the table below`,
  });
  canvas.dataset.metric = metric;
  const table = numbersTable(
    'chart-data',
    title,
    ['Day', ...series.map((s) => s.model)],
    days.map((day, i) => [day, series.map((s) => s.values[i])] as const),
  );
  container.replaceChildren(
    el(
      'figure',
      { className: 'chart' },
      el('figcaption', { textContent: `${title} · ${total}` }),
      el('div', { className: 'chart-box' }, canvas),
      el('details', {}, el('summary', { textContent: 'The numbers' }), el('div', { className: 'table-scroll' }, table)),
    ),
  );
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: days.map((day) => day.slice(5)),
      datasets: series.map((s, i) => ({
        label: s.model,
        data: s.values,
        backgroundColor: PALETTE[i % PALETTE.length],
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      scales: {
        x: { stacked: true, ticks: { maxRotation: 0, autoSkipPadding: 8 } },
        y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } },
      },
      plugins: { legend: { position: 'bottom' } },
    },
  });
}
