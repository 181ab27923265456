import Database from 'better-sqlite3';
import t from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { TASK_COLUMNS } from '../../src/store/sqlite/rows.js';

/**
 * The SQLite store reads every task by the column names of TASK_COLUMNS into one row mapper
 * (toTask); the contract suite checks that a task round-trips. This pins the list to the table, so
 * that a column added to the table is either read or deliberately left out.
 */
t.test("TASK_COLUMNS are the tasks table's columns, in order, but for the queue's own three", async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.strictSame(
    db
      .prepare('SELECT * FROM tasks')
      .columns()
      .map((c) => c.name)
      .filter((name) => !['lease_expires_at', 'run_after', 'calling'].includes(name)),
    [...TASK_COLUMNS],
  );
});
