import Database from 'better-sqlite3';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';

/**
 * A SQLite database as a release with `version` migrations left it, for tests of the migrations
 * after it: the caller writes rows in that older shape, closes it, and opens it with SqliteStore.
 */
export function openAtSchemaVersion(path: string, version: number): Database.Database {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  for (const [index, migration] of SQLITE_MIGRATIONS.slice(0, version).entries()) {
    db.exec(migration);
    db.pragma(`user_version = ${index + 1}`);
  }
  return db;
}

/**
 * Inserts rows as an older schema holds them: a row mapped from today's record keeps only the
 * columns the table had then (a column added by a later migration gets that migration's default).
 */
export function insertAsOfSchema(db: Database.Database, table: string, rows: readonly object[]): void {
  if (rows.length === 0) return;
  const present = new Set((db.pragma(`table_info(${table})`) as { name: string }[]).map((c) => c.name));
  const columns = Object.keys(rows[0]!).filter((c) => present.has(c));
  const insert = db.prepare(
    `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
  );
  for (const row of rows) insert.run(Object.fromEntries(columns.map((c) => [c, (row as Record<string, unknown>)[c]])));
}
