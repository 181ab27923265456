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
