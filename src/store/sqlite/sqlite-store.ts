import type { Store } from '../port.js';
import { SqliteOAuth } from './oauth.js';
import { SqliteAccounts } from './accounts.js';
import { SqliteAdmin, SqliteUsage } from './admin.js';
import { SqliteBackendLimits } from './backend-limits.js';
import { SqliteIdempotencyKeys } from './idempotency-keys.js';
import { SqliteMedia } from './media.js';
import { SqliteDatabase, type SqliteStoreOptions } from './sqlite-database.js';
import { SqliteTasks } from './tasks.js';
import { SqliteWebhooks } from './webhooks.js';

export type { SqliteStoreOptions } from './sqlite-database.js';

/**
 * The embedded store: one SQLite file in WAL mode, its aggregates over one SqliteDatabase that owns
 * the connection, the group commit and the statement cache.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  readonly accounts: SqliteAccounts;
  readonly tasks: SqliteTasks;
  readonly backendLimits: SqliteBackendLimits;
  readonly media: SqliteMedia;
  readonly idempotencyKeys: SqliteIdempotencyKeys;
  readonly webhooks: SqliteWebhooks;
  readonly oauth: SqliteOAuth;
  readonly admin: SqliteAdmin;
  readonly usage: SqliteUsage;
  protected readonly database: SqliteDatabase;

  /** @param source a file name, or a database already opened (by a test that inspects it). */
  constructor(source: string | SqliteDatabase, options: SqliteStoreOptions = {}) {
    this.database = typeof source === 'string' ? new SqliteDatabase(source, options) : source;
    this.accounts = new SqliteAccounts(this.database);
    this.tasks = new SqliteTasks(this.database);
    this.backendLimits = new SqliteBackendLimits(this.database);
    this.media = new SqliteMedia(this.database);
    this.idempotencyKeys = new SqliteIdempotencyKeys(this.database);
    this.webhooks = new SqliteWebhooks(this.database);
    this.oauth = new SqliteOAuth(this.database);
    this.admin = new SqliteAdmin(this.database);
    this.usage = new SqliteUsage(this.database);
  }

  async migrate(): Promise<void> {
    this.database.migrate();
  }

  async ping(): Promise<void> {
    this.database.statement('SELECT 1').get();
  }

  close(): Promise<void> {
    return this.database.close();
  }
}
