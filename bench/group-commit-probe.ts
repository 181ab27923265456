/**
 * What group commit of task inserts buys, without HTTP (BENCHMARKS.md; the store does it in
 * `SqliteStore.groupCommit`). Runs the statements of one create — active-task count, balance
 * update, ledger row, task row — on the real schema in WAL mode, committing every `batch` tasks,
 * each task in its own SAVEPOINT (so one refused task would not undo the others), and reports the
 * main-thread time and CPU per task. synchronous=FULL throughout, and NORMAL to show what FULL costs at each batch size.
 *
 *   npx tsx bench/group-commit-probe.ts
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTask } from '../src/core/task.js';
import { newIdAt } from '../src/ids.js';
import { SQLITE_MIGRATIONS } from '../src/store/sqlite/migrations.js';
import { fromTask } from '../src/store/sqlite/rows.js';

const TASKS_PER_RUN = 2000;
/** Tasks per commit, and the synchronous mode (NORMAL only for comparison: it is not durable on power loss). */
const RUNS: [number, 'FULL' | 'NORMAL'][] = [
  [1, 'FULL'],
  [4, 'FULL'],
  [16, 'FULL'],
  [64, 'FULL'],
  [1, 'NORMAL'],
  [4, 'NORMAL'],
  [16, 'NORMAL'],
  [64, 'NORMAL'],
];

const dir = mkdtempSync(join(tmpdir(), 'imagegen-group-commit-'));
try {
  const results = [];
  for (const [batch, synchronous] of RUNS) {
    const db = new Database(join(dir, `batch-${batch}-${synchronous}.sqlite`));
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma('foreign_keys = ON');
    db.pragma('temp_store = MEMORY'); // as the store: savepoint sub-journals in memory
    for (const migration of SQLITE_MIGRATIONS) db.exec(migration);
    const accountId = newIdAt(new Date());
    db.prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, ?)').run(accountId, 'probe', 1e12, Date.now());

    const active = db.prepare('SELECT active_tasks FROM accounts WHERE id = ?');
    const countIn = db.prepare('UPDATE accounts SET active_tasks = active_tasks + 1 WHERE id = ?');
    const debit = db.prepare('UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance - ? >= 0 RETURNING balance');
    const ledger = db.prepare('INSERT INTO ledger (account_id, kind, amount, balance_after, task_id, note, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
    const columns = Object.keys(fromTask(newTask(accountId)));
    const insert = db.prepare(`INSERT INTO tasks (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`);
    const drain = db.prepare("UPDATE tasks SET status = 'COMPLETED' WHERE status = 'CREATED'");
    const uncount = db.prepare('UPDATE accounts SET active_tasks = 0');
    const [begin, commit, savepoint, release] = ['BEGIN IMMEDIATE', 'COMMIT', 'SAVEPOINT task', 'RELEASE task'].map((sql) => db.prepare(sql));

    const createOne = () => {
      const task = newTask(accountId);
      savepoint.run();
      active.get(accountId);
      const { balance } = debit.get(task.cost, accountId, task.cost) as { balance: number };
      ledger.run(accountId, 'debit', task.cost, balance, task.id, null, task.createdAt.getTime());
      insert.run(fromTask(task));
      countIn.run(accountId);
      release.run();
    };

    // Workers keep up: the queue is emptied every 500 tasks, as in the HTTP bench between runs.
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let done = 0; done < TASKS_PER_RUN; ) {
      begin.run();
      for (let i = 0; i < batch; i++, done++) createOne();
      commit.run();
      if (done % 500 < batch) {
        drain.run();
        uncount.run();
      }
    }
    const wallUs = ((performance.now() - t0) * 1000) / TASKS_PER_RUN;
    const cpu = process.cpuUsage(cpu0);
    db.close();
    results.push({
      synchronous,
      tasks_per_commit: batch,
      main_thread_us_per_task: Math.round(wallUs),
      user_cpu_us_per_task: Math.round(cpu.user / TASKS_PER_RUN),
      system_cpu_us_per_task: Math.round(cpu.system / TASKS_PER_RUN),
      max_creates_per_sec_on_one_thread: Math.round(1e6 / wallUs),
    });
  }
  console.table(results);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

function newTask(accountId: string) {
  const now = new Date();
  return createTask(
    { model: 'alpha-pro', prompt: 'a lighthouse at dawn, seen from the sea, in watercolour', parameters: { aspect_ratio: '16:9', resolution: '1K' } },
    { accountId, now, newId: () => newIdAt(now) },
  );
}
