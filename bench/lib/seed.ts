import Database from 'better-sqlite3';
import type { TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { taskValues, type TaskRow } from '../../src/store/sqlite/rows.js';

/** Seeded tasks are this far apart in time, oldest first, ending a little before now. */
const SPACING_MS = 10;
const TOTAL_SPAN_TASKS = 1_000_000;
/** 21 columns a row: 2 100 parameters a statement, well within SQLite's 32 766. */
const ROWS_PER_INSERT = 100;

export interface SeedResult {
  inserted: number;
  elapsedMs: number;
  /** Ids of the seeded tasks, every `keepEvery`-th one (to build deep cursors from). */
  sampleIds: Map<number, string>;
}

/**
 * Writes completed tasks of one account straight into the SQLite file (the service is not
 * running): one transaction, one prepared statement, rows made by the store's own `taskValues` so
 * their format is exactly what the service writes. Task i is created at a fixed time for its
 * index, so seeding [0, 10k) and later [10k, 1M) gives the same rows as seeding [0, 1M) at once.
 */
export function seedCompletedTasks(
  dbPath: string,
  accountId: string,
  from: number,
  to: number,
  keepIndices: number[],
): SeedResult {
  const started = performance.now();
  const db = new Database(dbPath);
  // Bench data: nothing here needs to survive a power cut, and a rollback journal avoids writing
  // the whole table twice (WAL, then checkpoint). The service's own connection switches back to WAL.
  db.pragma('journal_mode = DELETE');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');
  const columns = Object.keys(taskValues(sampleTask(accountId, 0))) as (keyof TaskRow)[];
  // Many rows per INSERT, bound by position, and the indexes built once at the end: 290 000 rows
  // took 8.4–10.3 s one named-parameter INSERT at a time, 5.1–6.6 s this way (the full bench's 1 M
  // store took 45 s to seed on a slow machine, where the whole run came within 10 s of its limit).
  const rowPlaceholders = `(${columns.map(() => '?').join(', ')})`;
  const insertRows = (count: number) =>
    db.prepare(
      `INSERT INTO tasks (${columns.join(', ')}) VALUES ${Array.from({ length: count }, () => rowPlaceholders).join(', ')}`,
    );
  const fullInsert = insertRows(ROWS_PER_INSERT);
  const keep = new Set(keepIndices);
  const sampleIds = new Map<number, string>();
  // The table's own indexes are dropped for the load and built again from their schema text: one
  // sort each instead of an insert per row.
  const indexes = db
    .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL")
    .all() as { name: string; sql: string }[];
  db.transaction(() => {
    for (const index of indexes) db.exec(`DROP INDEX "${index.name}"`);
    for (let start = from; start < to; start += ROWS_PER_INSERT) {
      const end = Math.min(to, start + ROWS_PER_INSERT);
      const values: unknown[] = [];
      for (let i = start; i < end; i++) {
        const row = taskValues(sampleTask(accountId, i));
        for (const column of columns) values.push(row[column]);
        if (keep.has(i)) sampleIds.set(i, row.id);
      }
      (end - start === ROWS_PER_INSERT ? fullInsert : insertRows(end - start)).run(values);
    }
    for (const index of indexes) db.exec(index.sql);
  })();
  db.pragma('journal_mode = WAL');
  db.close();
  return { inserted: to - from, elapsedMs: performance.now() - started, sampleIds };
}

const BASE_TIME = Date.now() - (TOTAL_SPAN_TASKS + 1000) * SPACING_MS;
const RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:2'];
const SIZES: Record<string, [number, number]> = {
  '1:1': [1024, 1024],
  '16:9': [1376, 768],
  '9:16': [768, 1376],
  '4:3': [1200, 896],
  '3:2': [1264, 848],
};

function sampleTask(accountId: string, index: number): TaskRecord {
  const createdAt = new Date(BASE_TIME + index * SPACING_MS);
  const ratio = RATIOS[index % RATIOS.length];
  const [width, height] = SIZES[ratio];
  const id = newIdAt(createdAt);
  return {
    id,
    accountId,
    status: 'COMPLETED',
    model: index % 2 ? 'alpha-pro' : 'beta-v5-pro',
    prompt: `seeded task ${index}: a lighthouse at dawn, seen from the sea, in watercolour`,
    imageReference: [],
    parameters: { aspect_ratio: ratio, resolution: '1K', output_format: 'png', output_compression: null, seed: index },
    width,
    height,
    cost: 25,
    webhookUrl: null,
    endUserId: null,
    keyId: null,
    generated: [
      {
        media_id: newIdAt(new Date(createdAt.getTime() + 1)),
        content_type: 'image/png',
        width,
        height,
        size_bytes: 180_000 + (index % 5000),
      },
    ],
    error: null,
    attempt: 1,
    deferredAttempts: 0,
    createdAt,
    startedAt: new Date(createdAt.getTime() + 1),
    completedAt: new Date(createdAt.getTime() + 2),
  };
}

/**
 * Marks every CREATED task COMPLETED, as a worker pool that keeps up would. The create scenarios
 * run with no workers (rendering would take the CPU the API is measured on) and with the active-task
 * cap raised; without this, every account's count of active tasks would grow run after run. Run
 * between load runs only, never during one (a second writer would make the service wait on its lock).
 */
export function drainCreatedTasks(dbPath: string): number {
  const db = new Database(dbPath);
  try {
    db.pragma('busy_timeout = 10000');
    const now = Date.now();
    // As the worker's completions would, in one transaction: the tasks and the accounts' counts of active tasks.
    return db
      .transaction(() => {
        const drained = db
          .prepare(
            "UPDATE tasks SET status = 'COMPLETED', attempt = 1, started_at = ?, completed_at = ? WHERE status = 'CREATED'",
          )
          .run(now, now).changes;
        // (Checkouts from before the column, run by --compare-root, count their tasks instead.)
        const counted = (db.prepare('PRAGMA table_info(accounts)').all() as { name: string }[]).some(
          (c) => c.name === 'active_tasks',
        );
        if (counted) {
          db.prepare(
            "UPDATE accounts SET active_tasks = (SELECT count(*) FROM tasks WHERE tasks.account_id = accounts.id AND tasks.status IN ('CREATED', 'IN_PROGRESS'))",
          ).run();
        }
        return drained;
      })
      .immediate();
  } finally {
    db.close();
  }
}
