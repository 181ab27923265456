/**
 * The usage report of one account over 30 days with a million tasks stored (docs/design.md §3.11):
 * each store seeded straight through SQL (the service is not running) with 1 000 000 tasks over
 * 90 days, 45 000 of them the measured account's (1 500 a day over the last 30 days, three keys),
 * the rest 999 other accounts'; then the report `group_by=day,model` of the account over its 30
 * days asked `--runs` times, one after another, through the store's own `usage`. Prints one JSON
 * object per store: seeding time and the report's p50, p99 and max in ms. PostgreSQL is measured
 * where one answers (BENCH_DATABASE_URL, default the machine's), in a schema of its own.
 *
 *   npx tsx bench/usage-report.ts [--tasks 1000000] [--runs 200]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import type { Store, UsageStore } from '../src/store/port.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { DATABASE_URL, withSchema } from './lib/postgres.js';

const { values: flags } = parseArgs({
  options: { tasks: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '200' } },
});
const TOTAL = Number(flags.tasks);
const RUNS = Number(flags.runs);
const DAY = 86_400_000;
const ACCOUNT = '00000000-0000-7000-8000-000000000001';
const OWN = 45_000;
const NOW = Date.now();
const OWN_FROM = NOW - 30 * DAY;
const OTHERS_FROM = NOW - 90 * DAY;

/** Each seeded task's values, as SQL expressions of its index `i` (SQLite and PostgreSQL alike). */
const seeded = (hex: (expr: string, width: number) => string, integer: string) => {
  const ms = `(CASE WHEN i < ${OWN} THEN ${OWN_FROM} + i * ${Math.floor((30 * DAY) / OWN)}
    ELSE ${OTHERS_FROM} + (i - ${OWN}) * ${Math.floor((90 * DAY) / (TOTAL - OWN))} END)`;
  return {
    ms,
    id: `${hex(`(${ms} / 65536)`, 8)} || '-' || ${hex(`(${ms} % 65536)`, 4)} || '-7' || ${hex('(i % 4096)', 3)} || '-' ||
      ${hex(`(32768 + (i / 4096) % 16384)`, 4)} || '-' || ${hex('i', 12)}`,
    account: `(CASE WHEN i < ${OWN} THEN '${ACCOUNT}' ELSE 'acc-' || CAST(i % 999 AS ${integer}) END)`,
    model: `(CASE WHEN i % 2 = 0 THEN 'alpha-pro' ELSE 'beta-v5-pro' END)`,
    status: `(CASE WHEN i % 20 = 0 THEN 'FAILED' WHEN i % 25 = 0 THEN 'CANCELED' ELSE 'COMPLETED' END)`,
    generated: `(CASE WHEN i % 20 = 0 OR i % 25 = 0 THEN '[]' ELSE '[{"media_id":"m"}]' END)`,
    key: `(CASE WHEN i < ${OWN} THEN 'key-' || CAST(i % 3 AS ${integer}) ELSE NULL END)`,
  };
};

async function measure(usage: UsageStore): Promise<{ p50: number; p99: number; max: number; rows: number }> {
  const query = {
    from: new Date(Math.floor(OWN_FROM / DAY) * DAY),
    to: new Date(Math.floor(NOW / DAY) * DAY + DAY),
    groupBy: ['day', 'model'] as const,
    accountId: ACCOUNT,
  };
  let rows = 0;
  for (let i = 0; i < 5; i++) rows = (await usage.usage({ ...query, groupBy: [...query.groupBy] })).length;
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await usage.usage({ ...query, groupBy: [...query.groupBy] });
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => Number(times[Math.min(times.length - 1, Math.floor(q * times.length))].toFixed(2));
  return { p50: at(0.5), p99: at(0.99), max: at(1), rows };
}

async function sqlite(): Promise<object> {
  const dir = await mkdtemp(join(tmpdir(), 'usage-bench-'));
  try {
    const file = join(dir, 'imagegen.db');
    const store: Store = new SqliteStore(file);
    await store.migrate();
    await store.close();
    const started = performance.now();
    const db = new Database(file);
    db.pragma('journal_mode = DELETE');
    db.pragma('synchronous = OFF');
    const v = seeded((expr, width) => `printf('%0${width}x', ${expr})`, 'TEXT');
    db.exec(`
      WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 998)
      INSERT INTO accounts (id, name, balance, created_at)
      SELECT 'acc-' || i, 'other', 0, 0 FROM n UNION ALL SELECT '${ACCOUNT}', 'measured', 0, 0`);
    db.exec(`
      WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${TOTAL - 1})
      INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width,
        height, cost, generated, created_at, run_after, key_id)
      SELECT ${v.id}, ${v.account}, ${v.status}, ${v.model}, 'p', '[]', '1:1', '1K', 1024, 1024, 25, ${v.generated},
        ${v.ms}, ${v.ms}, ${v.key} FROM n`);
    db.exec('ANALYZE');
    db.close();
    const seedMs = Math.round(performance.now() - started);
    const reopened = new SqliteStore(file);
    await reopened.migrate();
    const report = await measure(reopened.usage);
    await reopened.close();
    return { store: 'sqlite', tasks: TOTAL, seed_ms: seedMs, ...report };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function postgres(): Promise<object> {
  return withSchema(async (schema) => {
    const store = new PostgresStore({ connectionString: DATABASE_URL, schema, poolSize: 2 });
    await store.migrate();
    const started = performance.now();
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`SET search_path = ${schema}`);
    const v = seeded((expr, width) => `lpad(to_hex(${expr}), ${width}, '0')`, 'text');
    await client.query(
      `INSERT INTO accounts (id, name, balance, created_at)
       SELECT 'acc-' || n, 'other', 0, now() FROM generate_series(0, 998) AS n
       UNION ALL SELECT '${ACCOUNT}', 'measured', 0, now()`,
    );
    await client.query(`
      INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width,
        height, cost, generated, created_at, run_after, key_id)
      SELECT ${v.id}, ${v.account}, ${v.status}, ${v.model}, 'p', '[]', '1:1', '1K', 1024, 1024, 25,
        ${v.generated}::json, to_timestamp(${v.ms} / 1000.0), to_timestamp(${v.ms} / 1000.0), ${v.key}
      FROM generate_series(0::bigint, ${TOTAL - 1}::bigint) AS i`);
    await client.query('VACUUM ANALYZE tasks');
    await client.end();
    const seedMs = Math.round(performance.now() - started);
    try {
      return { store: 'postgres', tasks: TOTAL, seed_ms: seedMs, ...(await measure(store.usage)) };
    } finally {
      await store.close();
    }
  });
}

console.log(JSON.stringify(await sqlite()));
const reachable = await new pg.Client({ connectionString: DATABASE_URL })
  .connect()
  .then(() => true)
  .catch(() => false);
if (reachable) console.log(JSON.stringify(await postgres()));
else console.log(JSON.stringify({ store: 'postgres', skipped: `no PostgreSQL at ${DATABASE_URL}` }));
process.exit(0);
