import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { TASK_COLUMNS } from '../../src/store/sqlite/rows.js';

const dir = mkdtempSync(`${tmpdir()}/rm-`);
const store = new SqliteStore(`${dir}/s.sqlite`);
await store.migrate();
const now = new Date();
const acc = await store.createAccount({ id: newIdAt(now), name: 'x', initialTokens: 1e9, now });
let last = '';
for (let i = 0; i < 2000; i++) {
  const t = createTask({ model: 'alpha-pro', prompt: 'a lighthouse at dawn, seen from the sea, in watercolour' } as never, { accountId: acc.id, now: new Date(), newId: () => newIdAt(new Date()) });
  await store.insertTaskWithDebit(t, { maxActiveTasks: 1e9 });
  last = t.id;
}
const db = new Database(`${dir}/s.sqlite`);
db.pragma('journal_mode = WAL');
const N = 200_000;
function time(label: string, fn: () => unknown) {
  for (let i = 0; i < 20000; i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) fn();
  console.log(label, (Number(process.hrtime.bigint() - t0) / N / 1000).toFixed(2), 'µs');
}
const one = db.prepare('SELECT 1');
const byId = db.prepare(`SELECT ${TASK_COLUMNS.join(', ')} FROM tasks WHERE id = ? AND account_id = ?`).raw();
const idOnly = db.prepare('SELECT id FROM tasks WHERE id = ?').raw();
for (let r = 0; r < 2; r++) {
  time('SELECT 1', () => one.get());
  time('id only', () => idOnly.get(last));
  time('task row raw', () => byId.get(last, acc.id));
  time('store.getTask', () => store.getTask(acc.id, last));
  db.exec('BEGIN');
  time('task row raw in txn', () => byId.get(last, acc.id));
  db.exec('COMMIT');
}
