/**
 * Round trips per no-op task on PostgreSQL: bench/scale-out.ts's no-op scenario (ours and
 * graphile-worker at 1, 2 and 4 slots) with every query node-postgres sends counted by its SQL
 * text, printed per task. Not part of `npm run bench`: a tool for finding what a task costs.
 *
 *   tsx bench/pg-round-trips.ts
 */
import pg from 'pg';

const counts = new Map<string, number>();
const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const config = args[0] as string | { text?: string };
  const text = (typeof config === 'string' ? config : (config?.text ?? '?')).replace(/\s+/g, ' ').slice(0, 110);
  counts.set(text, (counts.get(text) ?? 0) + 1);
  return original.apply(this, args);
} as typeof pg.Client.prototype.query;

const { runScaleOutBench } = await import('./scale-out.js');
const rows = await runScaleOutBench((line) => process.stderr.write(`${line}\n`), ['noop']);
// 2 000 tasks for each of 1, 2 and 4 slots, ours and theirs.
const tasks = 3 * 2000;
process.stdout.write(`${JSON.stringify(rows)}\nqueries per task (over ${tasks} tasks of each queue):\n`);
for (const [text, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 40))
  process.stdout.write(`${(n / tasks).toFixed(2).padStart(7)}  ${text}\n`);
