import Database from 'better-sqlite3';
import { BackgroundCheckpointer } from './background-checkpointer.js';
import { SQLITE_MIGRATIONS } from './migrations.js';

/** Writes per group commit: bounds how long one batch holds the event loop. */
const MAX_WRITES_PER_COMMIT = 64;
/**
 * Task-list statements kept at most. Their SQL differs by page size, filters and the account's
 * models (listTasks), so unlike the store's other statements they are not a small fixed set.
 */
const MAX_LIST_STATEMENTS = 64;

/**
 * With checkpoints in the background the committing connection still checkpoints once the WAL
 * holds this many pages (SQLite's default is 1000). A PASSIVE checkpoint never starts the WAL
 * over; SQLite does that at the first commit that finds the WAL fully copied, which under steady
 * load (commits made while the thread copies) can take long. This checkpoint, made between two
 * commits, copies the little the thread left and lets the next commit start the file over; it
 * also bounds the WAL if the thread stops. Under the bench's create load the WAL file peaks at
 * about 85 MiB (with SQLite's defaults, about 45 MiB).
 */
const FALLBACK_AUTOCHECKPOINT_PAGES = 20_000;

/** A write waiting for the next group commit (SqliteDatabase.groupCommit). */
interface QueuedWrite {
  run: () => unknown;
  /** Whether the caller is promised the write is on disk when it resolves (see writeUnsynced). */
  durable: boolean;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

export interface SqliteStoreOptions {
  /** How long a writer waits for another process's lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
  /**
   * WAL checkpoints on a thread of their own (BackgroundCheckpointer) rather than in the commits of
   * the event loop: for the long-running processes (serve, worker). onCheckpointError hears of a
   * checkpoint that failed; the next commit asks for another.
   */
  checkpointInBackground?: { onCheckpointError: (message: string) => void };
}

/**
 * The one connection every aggregate of the embedded store shares: it owns the transactions (and
 * the group commit that batches them), the statement cache and the checkpoints. better-sqlite3 is
 * synchronous, which makes each transaction atomic within the process; BEGIN IMMEDIATE takes the
 * write lock up front so that concurrent processes queue on busy_timeout instead of failing
 * mid-transaction.
 */
export class SqliteDatabase {
  private readonly db: Database.Database;
  private readonly checkpointer: BackgroundCheckpointer | null = null;
  /** Called inside the batch's transaction, a better-sqlite3 transaction function is a SAVEPOINT. */
  private readonly inSavepoint: (run: () => unknown) => unknown;
  private readonly queuedWrites: QueuedWrite[] = [];
  private readonly statements = new Map<string, Database.Statement>();
  /** listStatement's statements, least recently used first. */
  private readonly listStatements = new Map<string, Database.Statement>();

  constructor(filename: string, options: SqliteStoreOptions = {}) {
    this.db = new Database(filename);
    this.db.pragma('journal_mode = WAL');
    // FULL: what a client is told (a 202 promises the task exists and was paid for) must survive
    // power loss, not only a crash. Claims and leases opt out: writeUnsynced.
    this.db.pragma('synchronous = FULL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 10_000}`);
    // Each write of a group commit runs in a savepoint, and SQLite keeps the pages a savepoint may
    // have to restore in a sub-journal. By default a sub-journal past 64 KiB spills to a temporary
    // file (created, unlinked, then written page by page), which a batch of creates always passes:
    // that was a fifth of a create's CPU in pwrite calls (docs/performance-history.md, "Optimisations"). In memory
    // it costs a batch at most a few MiB, and a sub-journal is never needed after a crash anyway.
    this.db.pragma('temp_store = MEMORY');
    this.inSavepoint = this.db.transaction((run: () => unknown) => run());
    if (options.checkpointInBackground && filename !== ':memory:') {
      this.db.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
      this.checkpointer = new BackgroundCheckpointer(filename, options.checkpointInBackground.onCheckpointError);
    }
  }

  /** Runs fn in a BEGIN IMMEDIATE transaction whose COMMIT returns once it is on disk. */
  write<T>(fn: () => T): T {
    const result = this.db.transaction(fn).immediate();
    this.checkpointer?.committed();
    return result;
  }

  /**
   * Runs fn in a BEGIN IMMEDIATE transaction whose COMMIT does not wait for the disk, for
   * bookkeeping that no client is told about: claims and leases. It survives a crash of the process
   * (the write is in the OS's cache); it reaches the disk with the next synced commit of any
   * process, since the WAL is synced in order; and if power fails before that, it is lost whole and
   * simply happens again (a task or key is claimed anew, a webhook sent again). A create's claim of
   * its Idempotency-Key is completed in the create's own synced transaction. claimTasks also fails
   * tasks past their deadline: a client may read that before it is synced, and after a power failure
   * the task fails again at the next claim, with the same outcome.
   */
  writeUnsynced<T>(fn: () => T): T {
    this.statement('PRAGMA synchronous = NORMAL').run();
    try {
      return this.write(fn);
    } finally {
      this.statement('PRAGMA synchronous = FULL').run();
    }
  }

  /**
   * Group commit: writes that reach the store in the same turn of the event loop share one
   * transaction and so one WAL sync, the largest cost of a create under synchronous = FULL
   * (docs/performance-history.md). Each runs in its own savepoint, so one that throws (a 402, 429 or 409, a
   * constraint) rolls back alone, and later ones see earlier ones' writes. The promises settle after
   * COMMIT: a durable write resolves once it is on disk, so a 202 still means on disk. The batch
   * syncs if any of its writes is durable; a batch of claims only commits as writeUnsynced does.
   */
  groupCommit<T>(run: () => T, options: { durable: boolean }): Promise<T> {
    const { promise, resolve, reject } = Promise.withResolvers<T>();
    const queued: QueuedWrite = { run, durable: options.durable, resolve: resolve as (value: unknown) => void, reject };
    if (this.queuedWrites.push(queued) === 1) setImmediate(this.flushQueuedWrites);
    return promise;
  }

  private readonly flushQueuedWrites = (): void => {
    const batch = this.queuedWrites.splice(0, MAX_WRITES_PER_COMMIT);
    if (this.queuedWrites.length > 0) setImmediate(this.flushQueuedWrites);
    if (!this.db.open) {
      for (const write of batch) write.reject(new Error('The store is closed.'));
      return;
    }
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    const commit = batch.some((write) => write.durable)
      ? (fn: () => void) => this.write(fn)
      : (fn: () => void) => this.writeUnsynced(fn);
    try {
      commit(() => {
        for (const write of batch) {
          try {
            outcomes.push({ ok: true, value: this.inSavepoint(write.run) });
          } catch (error) {
            // An error that ended the whole transaction (I/O, disk full) undid the writes before
            // this one too: it fails the batch. Otherwise only this write's savepoint was undone.
            if (!this.db.inTransaction) throw error;
            outcomes.push({ ok: false, error });
          }
        }
      });
    } catch (error) {
      for (const write of batch) write.reject(error);
      return;
    }
    batch.forEach((write, i) => {
      const outcome = outcomes[i];
      if (outcome.ok) write.resolve(outcome.value);
      else write.reject(outcome.error);
    });
  };

  /**
   * The prepared statement for sql, compiled on first use and kept: compiling costs more than
   * running the small queries of the request path (docs/performance-history.md, "Optimisations"). Every query of
   * the store goes through here; the SQL texts are fixed or built from bounded lists (IN with one
   * placeholder per reference), so the map stays small.
   */
  statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** A statement whose SQL varies without a small bound (task lists), from a cache of bounded size. */
  listStatement(sql: string): Database.Statement {
    let statement = this.listStatements.get(sql);
    if (statement) {
      this.listStatements.delete(sql);
    } else {
      statement = this.db.prepare(sql);
      if (this.listStatements.size >= MAX_LIST_STATEMENTS)
        this.listStatements.delete(this.listStatements.keys().next().value!);
    }
    this.listStatements.set(sql, statement);
    return statement;
  }

  /** The raw connection, for what only SQLite-specific tests inspect (pragmas). */
  get connection(): Database.Database {
    return this.db;
  }

  migrate(): void {
    this.write(() => {
      const current = this.db.pragma('user_version', { simple: true }) as number;
      for (let version = current; version < SQLITE_MIGRATIONS.length; version++) {
        this.db.exec(SQLITE_MIGRATIONS[version]);
        this.db.pragma(`user_version = ${version + 1}`);
      }
    });
  }

  async close(): Promise<void> {
    // Writes already queued for the next group commit are committed (or refused), not dropped.
    while (this.queuedWrites.length > 0 && this.db.open) this.flushQueuedWrites();
    await this.checkpointer?.stop();
    if (this.db.open) this.db.close();
  }
}
