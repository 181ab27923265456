import type { Store } from '../port.js';
import { PostgresOAuth } from './oauth.js';
import { PostgresAccounts } from './accounts.js';
import { PostgresAdmin, PostgresUsage } from './admin.js';
import { PostgresBackendLimits } from './backend-limits.js';
import { PostgresIdempotencyKeys } from './idempotency-keys.js';
import { PostgresMedia } from './media.js';
import { PostgresDatabase, type PostgresStoreOptions } from './postgres-database.js';
import type { TaskSignal } from './task-signals.js';
import { PostgresTasks } from './tasks.js';
import { PostgresWebhooks } from './webhooks.js';

export type { PostgresStoreOptions } from './postgres-database.js';

/**
 * The scale-out store: PostgreSQL through a pool of connections, shared by any number of API and
 * worker processes, its aggregates over one PostgresDatabase. Correctness rests on row locks and
 * conditional updates, never on a single writer: a debit is `UPDATE … WHERE balance >= cost`, the
 * cap is checked under the account's row lock, a claim is `FOR UPDATE SKIP LOCKED`, and every
 * finishing write is fenced by the attempt number.
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly accounts: PostgresAccounts;
  readonly tasks: PostgresTasks;
  readonly backendLimits: PostgresBackendLimits;
  readonly media: PostgresMedia;
  readonly idempotencyKeys: PostgresIdempotencyKeys;
  readonly webhooks: PostgresWebhooks;
  readonly oauth: PostgresOAuth;
  readonly admin: PostgresAdmin;
  readonly usage: PostgresUsage;
  private readonly database: PostgresDatabase;

  constructor(options: PostgresStoreOptions) {
    this.database = new PostgresDatabase(options);
    this.accounts = new PostgresAccounts(this.database);
    this.tasks = new PostgresTasks(this.database);
    this.backendLimits = new PostgresBackendLimits(this.database);
    this.media = new PostgresMedia(this.database);
    this.idempotencyKeys = new PostgresIdempotencyKeys(this.database);
    this.webhooks = new PostgresWebhooks(this.database);
    this.oauth = new PostgresOAuth(this.database);
    this.admin = new PostgresAdmin(this.database);
    this.usage = new PostgresUsage(this.database);
  }

  migrate(): Promise<void> {
    return this.database.migrate();
  }

  async ping(): Promise<void> {
    await this.database.query('SELECT 1');
  }

  close(): Promise<void> {
    return this.database.close();
  }

  /** Task signals from every process on this database (LISTEN/NOTIFY); the store raises them itself. */
  listen(onSignal: (signal: TaskSignal) => void): Promise<void> {
    return this.database.listen(onSignal);
  }

  /** A secret every process of the cluster shares; the first process to ask makes it. */
  async sharedSecret(name: string, newSecret: () => string): Promise<string> {
    const { rows } = await this.database.query<{ secret: string }>(
      `INSERT INTO service_secrets (name, secret, created_at) VALUES ($1, $2, now())
       ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING secret`,
      [name, newSecret()],
    );
    return rows[0].secret;
  }
}
