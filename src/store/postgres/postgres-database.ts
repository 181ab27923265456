import pg from 'pg';
import { POSTGRES_MIGRATIONS } from './migrations.js';
import { CHANNEL_SQL, TaskSignals, type TaskSignal } from './task-signals.js';

/** One connection of the pool, inside a transaction. */
export type Tx = pg.PoolClient;
/** The database or a transaction's connection: for statements that run either way. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(sql: string | pg.QueryConfig, params?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * A statement of the queue's hot path, prepared by name on each connection the first time it
 * runs there: parsed and planned once per connection instead of on every call (a claim's read of
 * the turn order took longer to plan than to run). Its text must never vary under one name.
 */
export function prepared(name: string, text: string, values: unknown[]): pg.QueryConfig {
  return { name, text, values };
}

/**
 * A task status written into a prepared statement's text, where a partial index on that status
 * must serve it: a generic plan cannot prove a bound value matches an index's predicate.
 */
export function statusLiteral(status: string): string {
  if (!/^[A-Z_]+$/.test(status)) throw new Error(`Not a task status: ${status}`);
  return `'${status}'`;
}

export interface PostgresStoreOptions {
  connectionString: string;
  /** Connections in the pool; each concurrent transaction holds one. */
  poolSize?: number;
  /** Tables live in this schema (created if missing); default: the connection's search_path. */
  schema?: string;
}

/** The lock every migrating process takes first, so that processes started together migrate one at a time. */
const MIGRATION_LOCK_KEY = 7_320_241_120;
/** SQLSTATEs after which a transaction is simply run again: serialization failure, deadlock. */
const RETRIED_SQLSTATES = new Set(['40001', '40P01']);
const MAX_TRANSACTION_ATTEMPTS = 5;

// bigint (int8) columns hold token amounts and counts, far below 2^53: numbers, not strings.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * The pool every aggregate of the scale-out store shares: it owns the transactions (retried after a
 * deadlock or serialization failure), the migrations and the cross-process signals, and close()
 * waits for the work it started.
 */
export class PostgresDatabase {
  private readonly pool: pg.Pool;
  /**
   * Connections whose commits do not wait for the WAL flush (synchronous_commit off for the
   * session): a statement on its own there is an unsynced transaction in one round trip, where
   * BEGIN, SET LOCAL and COMMIT would cost three more. Opened on first use.
   */
  private readonly unsyncedPool: pg.Pool;
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly schema: string | undefined;
  /** Cross-process signals (LISTEN/NOTIFY); started by listen(). */
  private signals: TaskSignals | null = null;
  private closing: Promise<void> | null = null;

  constructor(private readonly options: PostgresStoreOptions) {
    this.schema = options.schema;
    if (this.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(this.schema))
      throw new Error(`Invalid schema name ${this.schema}`);
    const searchPath = this.schema ? `-c search_path=${this.schema}` : '';
    const pool = (settings: string) =>
      new pg.Pool({
        connectionString: options.connectionString,
        max: options.poolSize ?? 10,
        types,
        ...(settings ? { options: settings } : {}),
      });
    this.pool = pool(searchPath);
    this.unsyncedPool = pool(`${searchPath} -c synchronous_commit=off`.trim());
    // An idle connection that the server drops is replaced on next use; it must not crash the process.
    this.pool.on('error', () => {});
    this.unsyncedPool.on('error', () => {});
  }

  /** Runs op, counted so that close() waits for it. */
  private track<T>(op: Promise<T>): Promise<T> {
    this.inFlight.add(op);
    const forget = () => this.inFlight.delete(op);
    op.then(forget, forget);
    return op;
  }

  /** One statement on its own (autocommit). */
  query<R extends pg.QueryResultRow>(sql: string | pg.QueryConfig, params?: unknown[]): Promise<pg.QueryResult<R>> {
    return this.track(this.pool.query<R>(sql, params));
  }

  /**
   * One statement on its own whose commit does not wait for the WAL flush: for bookkeeping no
   * client is told about (a claim), as transaction()'s unsynced; a crash of the server may undo it.
   */
  queryUnsynced<R extends pg.QueryResultRow>(
    sql: string | pg.QueryConfig,
    params?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return this.track(this.unsyncedPool.query<R>(sql, params));
  }

  /**
   * Runs fn in one transaction (READ COMMITTED: every conflict is settled by a row lock or a
   * conditional update), again from the start after a deadlock or serialization failure.
   * unsynced: the commit does not wait for the WAL flush, for bookkeeping no client is told about
   * (claims, leases), as the SQLite store's writeUnsynced; a crash of the server may undo it whole.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>, options: { unsynced?: boolean } = {}): Promise<T> {
    return this.track(
      (async () => {
        for (let attempt = 1; ; attempt++) {
          const retry = await this.withClient(async (client) => {
            try {
              await client.query(options.unsynced ? 'BEGIN; SET LOCAL synchronous_commit = off' : 'BEGIN');
              const result = await fn(client);
              await client.query('COMMIT');
              return { result };
            } catch (error) {
              await client.query('ROLLBACK').catch(() => {});
              const code = (error as { code?: string }).code;
              if (code && RETRIED_SQLSTATES.has(code) && attempt < MAX_TRANSACTION_ATTEMPTS) return null;
              throw error;
            }
          });
          if (retry) return retry.result;
        }
      })(),
    );
  }

  async migrate(): Promise<void> {
    await this.withClient(async (client) => {
      if (this.schema) await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`).catch(ignoreConcurrentCreate);
      // Session lock: held across the migrations' own transactions, released below or with the connection.
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        await client.query(
          'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
        );
        const { rows } = await client.query<{ version: number }>(
          'SELECT coalesce(max(version), 0) AS version FROM schema_migrations',
        );
        for (let version = rows[0].version; version < POSTGRES_MIGRATIONS.length; version++) {
          await client.query('BEGIN');
          try {
            await client.query(POSTGRES_MIGRATIONS[version]);
            await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [version + 1]);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          }
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      }
    });
  }

  /**
   * A connection of the pool for fn. A checked-out connection has no listener of the pool's, so a
   * reset between two statements (a failover, a restarted pooler) would be an unhandled 'error'
   * event that ends the process: it is held here instead, the next statement fails with it, and
   * the broken connection is destroyed rather than returned to the pool.
   */
  private async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let lost: Error | undefined;
    const onError = (error: Error) => {
      lost ??= error;
    };
    client.on('error', onError);
    try {
      return await fn(client);
    } finally {
      client.release(lost);
      // A destroyed connection may still report its end; nobody is left to hear it.
      if (!lost) client.off('error', onError);
    }
  }

  /**
   * Subscribes to task signals from every process on this database (LISTEN on a connection of its
   * own). The aggregates raise them (notify) in the transactions that create and change tasks.
   */
  async listen(onSignal: (signal: TaskSignal) => void): Promise<void> {
    this.signals ??= new TaskSignals(this.options.connectionString, this.schema);
    await this.signals.listen(onSignal);
  }

  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    // Work already started (a create whose 202 is on its way) is committed, not cut off.
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.signals?.close();
    await Promise.all([this.pool.end(), this.unsyncedPool.end()]);
  }
}

/** Raises a task signal when the transaction commits (NOTIFY is delivered at commit, never for a rollback). */
export async function notify(tx: Tx, signal: TaskSignal): Promise<void> {
  await tx.query(`SELECT pg_notify(${CHANNEL_SQL}, $1)`, [TaskSignals.payload(signal)]);
}

/** SQL with @name placeholders (as newestFirstKeyset writes them) as $n placeholders and their values. */
export function numbered(sql: string, params: Record<string, unknown>): { sql: string; values: unknown[] } {
  const names: string[] = [];
  const text = sql.replace(/@([a-zA-Z_][a-zA-Z0-9_]*)/g, (_, name: string) => {
    let index = names.indexOf(name);
    if (index === -1) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { sql: text, values: names.map((name) => params[name]) };
}

function ignoreConcurrentCreate(error: { code?: string }): void {
  // Two processes creating the same schema at once: one of them gets a unique violation.
  if (error.code !== '23505' && error.code !== '42P06') throw error;
}
