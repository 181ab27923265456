import Database from 'better-sqlite3';
import { TASK_STATUSES } from '../../../schemas/resources.js';
import type { WebhookEventType } from '../../../schemas/webhooks.js';
import { DomainError } from '../../core/errors.js';
import {
  afterLostLease,
  admitsAnotherActiveTask,
  countsAsActive,
  DEADLINE_EXCEEDED,
  isPastDeadline,
  webhookEventFor,
} from '../../core/task-execution.js';
import {
  generatedMediaRef,
  invalidMediaReference,
  nextStatus,
  refundsOnEntry,
  statusesAllowing,
  type GeneratedMediaRef,
  type TaskRecord,
  type TaskStatus,
} from '../../core/task.js';
import { newIdAt, uuidv7Floor } from '../../ids.js';
import type {
  Account,
  ApiKeyRecord,
  ClaimPolicy,
  GeneratedMediaInput,
  LedgerEntry,
  LedgerKind,
  Page,
  Store,
  TaskCreationLimits,
  TaskListQuery,
} from '../port.js';
import { decodeCursor } from '../cursor.js';
import { newestFirstKeyset, pageFetchSize, pageOf } from '../paging.js';
import type { IdempotencyClaim, IdempotencyClaimRequest, IdempotencyCompletion } from '../port.js';
import type { MediaRecord } from '../port.js';
import type {
  WebhookAttemptOutcome,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookDeliveryWithAttempts,
  WebhookSecrets,
} from '../port.js';
import { BackgroundCheckpointer } from './background-checkpointer.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import {
  fromTask,
  TASK_COLUMNS,
  toAccount,
  toApiKey,
  toLedgerEntry,
  toTask,
  type AccountRow,
  type ApiKeyRow,
  type LedgerRow,
  type TaskRecordRow,
} from './rows.js';
import { fromMedia, msOrNull, toMedia, type MediaRow } from './rows.js';

/** The columns of a task record, by name: every read of a task goes through them and toTask. */
const TASK_SELECT = `SELECT ${TASK_COLUMNS.join(', ')} FROM tasks`;
/**
 * The models an account has tasks of, one index seek each (a skip scan of the
 * (account_id, model, status, id) index).
 */
const MODELS_OF_ACCOUNT = `
  WITH RECURSIVE listed(model) AS (
    SELECT (SELECT model FROM tasks WHERE account_id = @accountId ORDER BY model LIMIT 1)
    UNION ALL
    SELECT (SELECT model FROM tasks WHERE account_id = @accountId AND model > listed.model ORDER BY model LIMIT 1)
    FROM listed WHERE listed.model IS NOT NULL
  )
  SELECT model FROM listed WHERE model IS NOT NULL`;

/** Writes per group commit: bounds how long one batch holds the event loop. */
const MAX_WRITES_PER_COMMIT = 64;
/**
 * Task-list statements kept at most. Their SQL differs by page size, filters and the account's
 * models (listTasks), so unlike the store's other statements they are not a small fixed set.
 */
const MAX_LIST_STATEMENTS = 64;

/** A write waiting for the next group commit (SqliteStore.groupCommit). */
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
 * With checkpoints in the background the committing connection still checkpoints once the WAL
 * holds this many pages (SQLite's default is 1000). A PASSIVE checkpoint never starts the WAL
 * over; SQLite does that at the first commit that finds the WAL fully copied, which under steady
 * load (commits made while the thread copies) can take long. This checkpoint, made between two
 * commits, copies the little the thread left and lets the next commit start the file over; it
 * also bounds the WAL if the thread stops. Under the bench's create load the WAL file peaks at
 * about 85 MiB (with SQLite's defaults, about 45 MiB).
 */
const FALLBACK_AUTOCHECKPOINT_PAGES = 20_000;

/**
 * The embedded store: one SQLite file in WAL mode. better-sqlite3 is synchronous, which makes each
 * transaction atomic within the process; BEGIN IMMEDIATE takes the write lock up front so that
 * concurrent processes queue on busy_timeout instead of failing mid-transaction.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;

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
    // that was a fifth of a create's CPU in pwrite calls (BENCHMARKS.md, "Optimisations"). In memory
    // it costs a batch at most a few MiB, and a sub-journal is never needed after a crash anyway.
    this.db.pragma('temp_store = MEMORY');
    // Called inside the batch's transaction, a better-sqlite3 transaction function is a SAVEPOINT.
    this.inSavepoint = this.db.transaction((run: () => unknown) => run());
    if (options.checkpointInBackground && filename !== ':memory:') {
      this.db.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
      this.checkpointer = new BackgroundCheckpointer(filename, options.checkpointInBackground.onCheckpointError);
    }
  }

  private readonly checkpointer: BackgroundCheckpointer | null = null;

  private readonly inSavepoint: (run: () => unknown) => unknown;

  /** Runs fn in a BEGIN IMMEDIATE transaction whose COMMIT returns once it is on disk. */
  protected write<T>(fn: () => T): T {
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
   * its Idempotency-Key is completed in the create's own synced transaction. claimNextTask also fails
   * tasks past their deadline: a client may read that before it is synced, and after a power failure
   * the task fails again at the next claim, with the same outcome.
   */
  protected writeUnsynced<T>(fn: () => T): T {
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
   * (BENCHMARKS.md). Each runs in its own savepoint, so one that throws (a 402, 429 or 409, a
   * constraint) rolls back alone, and later ones see earlier ones' writes. The promises settle after
   * COMMIT: a durable write resolves once it is on disk, so a 202 still means on disk. The batch
   * syncs if any of its writes is durable; a batch of claims only commits as writeUnsynced does.
   */
  private groupCommit<T>(run: () => T, options: { durable: boolean }): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queued: QueuedWrite = {
        run,
        durable: options.durable,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      if (this.queuedWrites.push(queued) === 1) setImmediate(this.flushQueuedWrites);
    });
  }

  private readonly queuedWrites: QueuedWrite[] = [];

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

  protected get database(): Database.Database {
    return this.db;
  }

  private readonly statements = new Map<string, Database.Statement>();
  /** listTasks' statements, least recently used first. */
  private readonly listStatements = new Map<string, Database.Statement>();

  /**
   * The prepared statement for sql, compiled on first use and kept: compiling costs more than
   * running the small queries of the request path (BENCHMARKS.md, "Optimisations"). Every query of
   * the store goes through here; the SQL texts are fixed or built from bounded lists (IN with one
   * placeholder per reference), so the map stays small.
   */
  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** The task where `condition` holds, read by its named columns. */
  private readTask(condition: string, ...params: unknown[]): TaskRecord | null {
    const row = this.statement(`${TASK_SELECT} WHERE ${condition}`).get(...params) as TaskRecordRow | undefined;
    return row ? toTask(row) : null;
  }

  /** A task-list statement, from a cache of bounded size. */
  private listStatement(sql: string): Database.Statement {
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

  async migrate(): Promise<void> {
    this.write(() => {
      const current = this.db.pragma('user_version', { simple: true }) as number;
      for (let version = current; version < SQLITE_MIGRATIONS.length; version++) {
        this.db.exec(SQLITE_MIGRATIONS[version]);
        this.db.pragma(`user_version = ${version + 1}`);
      }
    });
  }

  async ping(): Promise<void> {
    this.statement('SELECT 1').get();
  }

  async close(): Promise<void> {
    // Writes already queued for the next group commit are committed (or refused), not dropped.
    while (this.queuedWrites.length > 0 && this.db.open) this.flushQueuedWrites();
    await this.checkpointer?.stop();
    if (this.db.open) this.db.close();
  }

  // ── accounts and ledger ──────────────────────────────────────────────────────────────────────

  async createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account> {
    return this.write(() => {
      this.statement('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, 0, ?)').run(
        input.id,
        input.name,
        input.now.getTime(),
      );
      if (input.initialTokens > 0)
        this.addLedgerEntry(input.id, 'grant', input.initialTokens, null, 'opening balance', input.now);
      return this.requireAccount(input.id);
    });
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const row = this.statement('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow | undefined;
    return row ? toAccount(row) : null;
  }

  async countAccounts(): Promise<number> {
    return (this.statement('SELECT count(*) AS n FROM accounts').get() as { n: number }).n;
  }

  async grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account> {
    return this.write(() => {
      if (!this.statement('SELECT 1 FROM accounts WHERE id = ?').get(input.accountId))
        throw new DomainError('not_found', 'Account not found.');
      this.addLedgerEntry(input.accountId, 'grant', input.amount, null, input.note, input.now);
      return this.requireAccount(input.accountId);
    });
  }

  async listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    const before = query.cursor ? Number(decodeCursor(query.cursor)) : Number.MAX_SAFE_INTEGER;
    const rows = this.statement(
      'SELECT * FROM ledger WHERE account_id = ? AND account_seq < ? ORDER BY account_seq DESC LIMIT ?',
    ).all(accountId, before, query.limit + 1) as LedgerRow[];
    return pageOf(rows.map(toLedgerEntry), query.limit, (e) => e.id);
  }

  async ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>> {
    const rows = this.statement('SELECT kind, sum(amount) AS total FROM ledger WHERE account_id = ? GROUP BY kind').all(
      accountId,
    ) as { kind: LedgerKind; total: number }[];
    const totals: Record<LedgerKind, number> = { grant: 0, debit: 0, refund: 0 };
    for (const row of rows) totals[row.kind] = row.total;
    return totals;
  }

  /** Moves the balance and records why, in the caller's transaction. Returns false when a debit would go negative. */
  private addLedgerEntry(
    accountId: string,
    kind: LedgerKind,
    amount: number,
    taskId: string | null,
    note: string | null,
    now: Date,
  ): boolean {
    const delta = kind === 'debit' ? -amount : amount;
    const updated = this.statement(
      'UPDATE accounts SET balance = balance + ? WHERE id = ? AND balance + ? >= 0 RETURNING balance',
    ).get(delta, accountId, delta) as { balance: number } | undefined;
    if (!updated) return false;
    // The next number of the account's own sequence; the write transaction serialises this read.
    this.statement(
      `INSERT INTO ledger (account_id, account_seq, kind, amount, balance_after, task_id, note, created_at)
         VALUES (?, (SELECT coalesce(max(account_seq), 0) + 1 FROM ledger WHERE account_id = ?), ?, ?, ?, ?, ?, ?)`,
    ).run(accountId, accountId, kind, amount, updated.balance, taskId, note, now.getTime());
    return true;
  }

  private requireAccount(accountId: string): Account {
    return toAccount(this.statement('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow);
  }

  // ── API keys ─────────────────────────────────────────────────────────────────────────────────

  async insertApiKey(input: {
    id: string;
    accountId: string;
    name: string;
    prefix: string;
    hash: string;
    now: Date;
  }): Promise<ApiKeyRecord> {
    this.statement(
      'INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ).run(input.id, input.accountId, input.name, input.prefix, input.hash, input.now.getTime());
    return toApiKey(this.statement('SELECT * FROM api_keys WHERE id = ?').get(input.id) as ApiKeyRow);
  }

  async findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const row = this.statement(
      `SELECT k.*, a.name AS account_name, a.balance AS account_balance, a.created_at AS account_created_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
       WHERE k.hash = ? AND k.revoked_at IS NULL`,
    ).get(hash) as
      | (ApiKeyRow & { account_name: string; account_balance: number; account_created_at: number })
      | undefined;
    if (!row) return null;
    return {
      key: toApiKey(row),
      account: toAccount({
        id: row.account_id,
        name: row.account_name,
        balance: row.account_balance,
        created_at: row.account_created_at,
      }),
    };
  }

  async listApiKeys(accountId?: string): Promise<ApiKeyRecord[]> {
    const rows = accountId
      ? this.statement('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at').all(accountId)
      : this.statement('SELECT * FROM api_keys ORDER BY created_at').all();
    return (rows as ApiKeyRow[]).map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = this.statement(
      'UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR prefix = ?) AND revoked_at IS NULL',
    ).run(now.getTime(), idOrPrefix, idOrPrefix);
    return result.changes > 0;
  }

  async markApiKeyUsed(keyId: string, now: Date): Promise<void> {
    // Informational, and on the request path once a minute per key: unsynced, in the turn's batch
    // rather than in a transaction of its own.
    await this.groupCommit(
      () => {
        this.statement('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now.getTime(), keyId);
      },
      { durable: false },
    );
  }

  // ── tasks ────────────────────────────────────────────────────────────────────────────────────

  async insertTaskWithDebit(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    return this.groupCommit(() => this.insertTask(task, limits, completesKey), { durable: true });
  }

  private insertTask(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey: IdempotencyCompletion | undefined,
  ): void {
    this.assertReferencesUsable(task);
    const active = this.statement('SELECT active_tasks FROM accounts WHERE id = ?').get(task.accountId) as
      | { active_tasks: number }
      | undefined;
    if (active && !admitsAnotherActiveTask(active.active_tasks, limits.maxActiveTasks)) {
      throw new DomainError(
        'too_many_active_tasks',
        `An account may have at most ${limits.maxActiveTasks} active tasks.`,
      );
    }
    if (!this.addLedgerEntry(task.accountId, 'debit', task.cost, task.id, null, task.createdAt)) {
      throw new DomainError('insufficient_tokens', `This task costs ${task.cost} tokens; the balance is lower.`);
    }
    this.statement(
      `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
         cost, webhook_url, generated, error_code, error_message, attempt, lease_expires_at, run_after, created_at, started_at, completed_at)
       VALUES (@id, @account_id, @status, @model, @prompt, @image_reference, @aspect_ratio, @resolution, @width, @height,
         @cost, @webhook_url, @generated, @error_code, @error_message, @attempt, @lease_expires_at, @run_after, @created_at, @started_at, @completed_at)`,
    ).run(fromTask(task));
    if (completesKey && !this.completeIdempotencyKeyInTransaction(completesKey)) {
      throw new DomainError(
        'idempotency_in_progress',
        'Another request with this Idempotency-Key took it over; retry shortly.',
      );
    }
    if (countsAsActive(task.status))
      this.statement('UPDATE accounts SET active_tasks = active_tasks + 1 WHERE id = ?').run(task.accountId);
  }

  /** Every image reference must be an upload of the task's account, unexpired when the task is created. */
  private assertReferencesUsable(task: TaskRecord): void {
    const mediaIds = task.imageReference;
    if (mediaIds.length === 0) return;
    const placeholders = mediaIds.map(() => '?').join(', ');
    const usable = new Set(
      this.statement(
        `SELECT id FROM media WHERE account_id = ? AND source = 'upload' AND expires_at > ? AND id IN (${placeholders})`,
      )
        .pluck()
        .all(task.accountId, task.createdAt.getTime(), ...mediaIds) as string[],
    );
    const badIndex = mediaIds.findIndex((id) => !usable.has(id));
    if (badIndex !== -1) throw invalidMediaReference(badIndex);
  }

  async getTask(accountId: string, taskId: string): Promise<TaskRecord | null> {
    return this.readTask('id = ? AND account_id = ?', taskId, accountId);
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // The account's tasks are in one index, ordered (account_id, model, status, id) (migration 6):
    // a page is the newest of the merge of its (model, status) ranges, each read newest first and
    // only as far as the merge takes from it, so a page costs the same at any depth. Time bounds
    // become id bounds (UUIDv7 ids start with their creation millisecond).
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {});
    if (query.createdBefore) {
      conditions.push('id < @createdBefore');
      params.createdBefore = uuidv7Floor(query.createdBefore);
    }
    if (query.createdAfter) {
      conditions.push('id >= @createdAfter');
      params.createdAfter = uuidv7Floor(new Date(query.createdAfter.getTime() + 1));
    }
    // Models are read from the index, not the catalog, so that a model the catalog no longer
    // offers still lists its tasks.
    const models = query.model
      ? [query.model]
      : (this.statement(MODELS_OF_ACCOUNT).pluck().all({ accountId }) as string[]);
    const statuses = query.status ? [query.status] : TASK_STATUSES;
    const where = conditions.join(' AND ');
    const ranges: string[] = [];
    for (const model of models) {
      for (const status of statuses) {
        const n = ranges.length;
        params[`model${n}`] = model;
        params[`status${n}`] = status;
        ranges.push(`${TASK_SELECT} WHERE ${where} AND model = @model${n} AND status = @status${n}`);
      }
    }
    if (ranges.length === 0) return { items: [], nextCursor: null };
    // The limit is written into the SQL: as a bound parameter it cost SQLite 2.5 times the whole
    // query (BENCHMARKS.md, "Optimisations").
    const rows = this.listStatement(
      `${ranges.join(' UNION ALL ')} ORDER BY id DESC LIMIT ${pageFetchSize(query.limit)}`,
    ).all(params) as TaskRecordRow[];
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  // ── media ────────────────────────────────────────────────────────────────────────────────────

  async scheduleBlobDeletion(blobKey: string, dueAt: Date): Promise<void> {
    this.queueBlobDeletion(blobKey, dueAt.getTime());
  }

  async insertMedia(media: MediaRecord, now: Date): Promise<boolean> {
    return this.groupCommit(() => this.insertMediaInTransaction(media, now), { durable: true });
  }

  /** Takes back the blob's reservation and inserts the row; false (nothing written) without a live reservation. */
  private insertMediaInTransaction(media: MediaRecord, now: Date): boolean {
    const reserved = this.statement('DELETE FROM blob_deletions WHERE blob_key = ? AND due_at > ?').run(
      media.blobKey,
      now.getTime(),
    );
    if (reserved.changes === 0) return false;
    this.statement(
      `INSERT INTO media (id, account_id, source, content_type, width, height, size_bytes, sha256, blob_key, task_id, created_at, expires_at)
         VALUES (@id, @account_id, @source, @content_type, @width, @height, @size_bytes, @sha256, @blob_key, @task_id, @created_at, @expires_at)`,
    ).run(fromMedia(media));
    return true;
  }

  async getMedia(accountId: string, mediaId: string, now: Date): Promise<MediaRecord | null> {
    const row = this.statement('SELECT * FROM media WHERE id = ? AND account_id = ? AND expires_at > ?').get(
      mediaId,
      accountId,
      now.getTime(),
    ) as MediaRow | undefined;
    return row ? toMedia(row) : null;
  }

  async getMediaById(mediaId: string, now: Date): Promise<MediaRecord | null> {
    const row = this.statement('SELECT * FROM media WHERE id = ? AND expires_at > ?').get(mediaId, now.getTime()) as
      | MediaRow
      | undefined;
    return row ? toMedia(row) : null;
  }

  async deleteMedia(accountId: string, mediaId: string, now: Date): Promise<string | null> {
    return this.groupCommit(
      () => {
        const row = this.statement(
          'DELETE FROM media WHERE id = ? AND account_id = ? AND expires_at > ? RETURNING blob_key, task_id',
        ).get(mediaId, accountId, now.getTime()) as { blob_key: string; task_id: string | null } | undefined;
        if (!row) return null;
        this.queueBlobDeletion(row.blob_key, now.getTime());
        if (row.task_id) this.forgetGeneratedMedia(row.task_id, mediaId);
        return row.blob_key;
      },
      { durable: true },
    );
  }

  async deleteExpiredMedia(now: Date, limit: number): Promise<number> {
    return this.write(() => {
      const rows = this.statement(
        `DELETE FROM media WHERE id IN (SELECT id FROM media WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)
           RETURNING id, blob_key, task_id`,
      ).all(now.getTime(), limit) as { id: string; blob_key: string; task_id: string | null }[];
      for (const row of rows) {
        this.queueBlobDeletion(row.blob_key, now.getTime());
        if (row.task_id) this.forgetGeneratedMedia(row.task_id, row.id);
      }
      return rows.length;
    });
  }

  /** A generated image that is gone leaves its task's `generated` list, rather than stay there with a URL that 404s. */
  private forgetGeneratedMedia(taskId: string, mediaId: string): void {
    const task = this.statement('SELECT generated FROM tasks WHERE id = ?').get(taskId) as
      | { generated: string }
      | undefined;
    if (!task) return;
    const generated = JSON.parse(task.generated) as GeneratedMediaRef[];
    const kept = generated.filter((ref) => ref.media_id !== mediaId);
    if (kept.length !== generated.length)
      this.statement('UPDATE tasks SET generated = ? WHERE id = ?').run(JSON.stringify(kept), taskId);
  }

  async listDueBlobDeletions(now: Date, limit: number): Promise<string[]> {
    const rows = this.statement('SELECT blob_key FROM blob_deletions WHERE due_at <= ? ORDER BY due_at LIMIT ?').all(
      now.getTime(),
      limit,
    ) as { blob_key: string }[];
    return rows.map((r) => r.blob_key);
  }

  async completeBlobDeletion(blobKey: string, now: Date): Promise<void> {
    // Bookkeeping: if a power cut undoes it, the blob's deletion is simply done again (deleting a
    // missing blob succeeds). As an autocommit it was a sync per blob on the event loop.
    await this.groupCommit(
      () => {
        this.statement('DELETE FROM blob_deletions WHERE blob_key = ? AND due_at <= ?').run(blobKey, now.getTime());
      },
      { durable: false },
    );
  }

  private queueBlobDeletion(blobKey: string, dueAt: number): void {
    this.statement(
      'INSERT INTO blob_deletions (blob_key, due_at) VALUES (?, ?) ON CONFLICT (blob_key) DO UPDATE SET due_at = excluded.due_at',
    ).run(blobKey, dueAt);
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.write(() => this.refundInTransaction(taskId, now));
  }

  private refundInTransaction(taskId: string, now: Date): boolean {
    const task = this.statement('SELECT account_id, cost FROM tasks WHERE id = ?').get(taskId) as
      | { account_id: string; cost: number }
      | undefined;
    if (!task) return false;
    // The unique (task_id, kind) index is the once-only guard; checking first keeps the balance untouched.
    if (this.statement("SELECT 1 FROM ledger WHERE task_id = ? AND kind = 'refund'").get(taskId)) return false;
    return this.addLedgerEntry(task.account_id, 'refund', task.cost, taskId, null, now);
  }

  // ── idempotency keys ─────────────────────────────────────────────────────────────────────────

  async claimIdempotencyKey(input: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const now = input.now.getTime();
    return this.groupCommit(
      (): IdempotencyClaim => {
        const row = this.statement('SELECT * FROM idempotency_keys WHERE account_id = ? AND key = ?').get(
          input.accountId,
          input.key,
        ) as IdempotencyKeyRow | undefined;
        // An expired row is as good as swept: the key starts a new life.
        const live = row && row.expires_at > now ? row : undefined;
        if (live) {
          if (live.fingerprint !== input.fingerprint) return { outcome: 'fingerprint_mismatch' };
          if (live.status === 'completed') {
            return {
              outcome: 'replay',
              response: {
                statusCode: live.response_status as number,
                headers: JSON.parse(live.response_headers ?? '{}') as Record<string, string>,
                body: live.response_body ?? Buffer.alloc(0),
              },
            };
          }
          if ((live.lease_expires_at ?? 0) > now) return { outcome: 'in_progress' };
          // The holder's lease ran out (its process died, most likely): this request takes over, and
          // the old token can no longer complete or release the row. expires_at stays: 24 h from first use.
          this.statement(
            'UPDATE idempotency_keys SET lease_token = ?, lease_expires_at = ? WHERE account_id = ? AND key = ?',
          ).run(input.leaseToken, now + input.leaseMs, input.accountId, input.key);
          return { outcome: 'acquired' };
        }
        this.statement(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
           VALUES (@accountId, @key, @fingerprint, 'in_flight', @leaseToken, @leaseExpiresAt, @now, @expiresAt)
           ON CONFLICT (account_id, key) DO UPDATE SET
             fingerprint = excluded.fingerprint, status = 'in_flight', lease_token = excluded.lease_token,
             lease_expires_at = excluded.lease_expires_at, response_status = NULL, response_headers = NULL,
             response_body = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at`,
        ).run({
          accountId: input.accountId,
          key: input.key,
          fingerprint: input.fingerprint,
          leaseToken: input.leaseToken,
          leaseExpiresAt: now + input.leaseMs,
          now,
          expiresAt: now + input.ttlMs,
        });
        return { outcome: 'acquired' };
      },
      { durable: false },
    );
  }

  async completeIdempotencyKey(input: IdempotencyCompletion): Promise<boolean> {
    // A replay answers from it, so synced; in the turn's batch rather than as an autocommit of its
    // own, which held the event loop for a sync after every idempotent upload.
    return this.groupCommit(() => this.completeIdempotencyKeyInTransaction(input), { durable: true });
  }

  private completeIdempotencyKeyInTransaction(input: IdempotencyCompletion): boolean {
    const result = this.statement(
      `UPDATE idempotency_keys
         SET status = 'completed', lease_token = NULL, lease_expires_at = NULL,
             response_status = ?, response_headers = ?, response_body = ?
         WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?`,
    ).run(
      input.response.statusCode,
      JSON.stringify(input.response.headers),
      input.response.body,
      input.accountId,
      input.key,
      input.leaseToken,
    );
    return result.changes > 0;
  }

  async renewIdempotencyKey(input: {
    accountId: string;
    key: string;
    leaseToken: string;
    leaseExpiresAt: Date;
  }): Promise<boolean> {
    // Bookkeeping, unsynced: after a crash the lease runs out sooner, which is what a crash should do.
    return this.groupCommit(
      () =>
        this.statement(
          "UPDATE idempotency_keys SET lease_expires_at = ? WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?",
        ).run(input.leaseExpiresAt.getTime(), input.accountId, input.key, input.leaseToken).changes === 1,
      { durable: false },
    );
  }

  async releaseIdempotencyKey(input: { accountId: string; key: string; leaseToken: string }): Promise<void> {
    // Bookkeeping like the claim it undoes, so unsynced and in the group commit. On its own it was
    // an autocommit under synchronous = FULL: one fsync on the event loop for every refused
    // idempotent create (a 402, a 429), however many arrived at once.
    await this.groupCommit(
      () => {
        this.statement(
          "DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND status = 'in_flight' AND lease_token = ?",
        ).run(input.accountId, input.key, input.leaseToken);
      },
      { durable: false },
    );
  }

  async deleteExpiredIdempotencyKeys(now: Date, limit: number): Promise<number> {
    // Bookkeeping (an expired key is already treated as absent), so unsynced, in the turn's batch.
    return this.groupCommit(
      () =>
        this.statement(
          'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)',
        ).run(now.getTime(), limit).changes,
      { durable: false },
    );
  }

  // ── task execution (the tasks table is the queue) ────────────────────────────────────────────

  async claimNextTask(policy: ClaimPolicy): Promise<TaskRecord | null> {
    const now = policy.now.getTime();
    return this.writeUnsynced(() => {
      const expired = this.statement(
        "SELECT id, attempt FROM tasks WHERE status = 'IN_PROGRESS' AND lease_expires_at < ?",
      ).all(now) as { id: string; attempt: number }[];
      for (const lost of expired) {
        const outcome = afterLostLease(lost.attempt, policy.maxAttempts);
        if (outcome.action === 'fail')
          this.finishInTransaction(lost.id, lost.attempt, 'fail', policy.now, { error: outcome.error });
        else this.requeueInTransaction(lost.id, lost.attempt, now);
      }

      const next = this.statement(
        "SELECT id, attempt, created_at FROM tasks WHERE status = 'CREATED' AND run_after <= ? ORDER BY id LIMIT 1",
      );
      type Candidate = { id: string; attempt: number; created_at: number };
      for (let row = next.get(now) as Candidate | undefined; row; row = next.get(now) as Candidate | undefined) {
        if (isPastDeadline(new Date(row.created_at), policy.now, policy.deadlineMs)) {
          this.finishInTransaction(row.id, row.attempt, 'fail', policy.now, {
            error: DEADLINE_EXCEEDED,
            fromStatuses: ['CREATED'],
          });
          continue;
        }
        const claimed = this.statement(
          `UPDATE tasks SET status = 'IN_PROGRESS', attempt = attempt + 1, lease_expires_at = ?, started_at = coalesce(started_at, ?)
             WHERE id = ? RETURNING ${TASK_COLUMNS.join(', ')}`,
        ).get(now + policy.leaseMs, now, row.id) as TaskRecordRow;
        return toTask(claimed);
      }
      return null;
    });
  }

  async renewLease(taskId: string, attempt: number, now: Date, leaseMs: number): Promise<boolean> {
    const result = this.writeUnsynced(() =>
      this.statement(
        "UPDATE tasks SET lease_expires_at = ? WHERE id = ? AND attempt = ? AND status = 'IN_PROGRESS'",
      ).run(now.getTime() + leaseMs, taskId, attempt),
    );
    return result.changes === 1;
  }

  async completeTask(input: {
    taskId: string;
    attempt: number;
    media: GeneratedMediaInput[];
    now: Date;
  }): Promise<boolean> {
    try {
      return await this.commitCompletion(input);
    } catch (error) {
      if (error instanceof BlobReservationLapsedError) return false;
      throw error;
    }
  }

  private commitCompletion(input: {
    taskId: string;
    attempt: number;
    media: GeneratedMediaInput[];
    now: Date;
  }): Promise<boolean> {
    return this.groupCommit(
      () => {
        const owner = this.statement('SELECT account_id FROM tasks WHERE id = ?').get(input.taskId) as
          | { account_id: string }
          | undefined;
        if (!owner) return false;
        const generated: GeneratedMediaRef[] = input.media.map(generatedMediaRef);
        if (!this.finishInTransaction(input.taskId, input.attempt, 'complete', input.now, { generated })) return false;
        for (const m of input.media) {
          const media: MediaRecord = {
            ...m,
            accountId: owner.account_id,
            source: 'generated',
            taskId: input.taskId,
            createdAt: input.now,
          };
          if (!this.insertMediaInTransaction(media, input.now)) {
            // A blob whose reservation lapsed may already be swept: complete nothing, keep the task
            // IN_PROGRESS for a later attempt. Throwing rolls the whole transaction back.
            throw new BlobReservationLapsedError(m.blobKey);
          }
        }
        return true;
      },
      { durable: true },
    );
  }

  async failTask(input: {
    taskId: string;
    attempt: number;
    error: { code: string; message: string };
    now: Date;
  }): Promise<boolean> {
    return this.groupCommit(
      () => this.finishInTransaction(input.taskId, input.attempt, 'fail', input.now, { error: input.error }),
      { durable: true },
    );
  }

  async requeueTask(input: { taskId: string; attempt: number; runAfter: Date; now: Date }): Promise<boolean> {
    return this.groupCommit(() => this.requeueInTransaction(input.taskId, input.attempt, input.runAfter.getTime()), {
      durable: true,
    });
  }

  async cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord> {
    return this.groupCommit(
      () => {
        const row = this.statement('SELECT status, attempt FROM tasks WHERE id = ? AND account_id = ?').get(
          taskId,
          accountId,
        ) as { status: TaskStatus; attempt: number } | undefined;
        if (!row) throw new DomainError('not_found', 'Task not found.');
        nextStatus(row.status, 'cancel'); // throws invalid_state for a terminal task
        this.finishInTransaction(taskId, row.attempt, 'cancel', now, {
          fromStatuses: statusesAllowing('cancel'),
          anyAttempt: true,
        });
        return this.readTask('id = ?', taskId)!;
      },
      { durable: true },
    );
  }

  async getTaskById(taskId: string): Promise<TaskRecord | null> {
    return this.readTask('id = ?', taskId);
  }

  async mediaBlobKeys(accountId: string, mediaIds: string[]): Promise<Map<string, string>> {
    if (mediaIds.length === 0) return new Map();
    const rows = this.statement(
      `SELECT id, blob_key FROM media WHERE account_id = ? AND id IN (${mediaIds.map(() => '?').join(', ')})`,
    ).all(accountId, ...mediaIds) as { id: string; blob_key: string }[];
    return new Map(rows.map((r) => [r.id, r.blob_key]));
  }

  private requeueInTransaction(taskId: string, attempt: number, runAfter: number): boolean {
    const result = this.statement(
      "UPDATE tasks SET status = 'CREATED', lease_expires_at = NULL, run_after = ? WHERE id = ? AND attempt = ? AND status = 'IN_PROGRESS'",
    ).run(runAfter, taskId, attempt);
    return result.changes === 1;
  }

  /**
   * Moves a task into a terminal state if it is still where `event` may start from (by default
   * IN_PROGRESS under this attempt), refunding and enqueueing the webhook event with it.
   */
  private finishInTransaction(
    taskId: string,
    attempt: number,
    event: 'complete' | 'fail' | 'cancel',
    now: Date,
    details: {
      generated?: GeneratedMediaRef[];
      error?: { code: string; message: string };
      fromStatuses?: TaskStatus[];
      anyAttempt?: boolean;
    },
  ): boolean {
    const fromStatuses = details.fromStatuses ?? ['IN_PROGRESS'];
    const target = nextStatus(fromStatuses[0], event);
    const updated = this.statement(
      `UPDATE tasks SET status = ?, generated = coalesce(?, generated), error_code = ?, error_message = ?,
           completed_at = ?, lease_expires_at = NULL
         WHERE id = ? AND status IN (${fromStatuses.map(() => '?').join(', ')}) ${details.anyAttempt ? '' : 'AND attempt = ?'}
         RETURNING account_id, webhook_url`,
    ).get(
      target,
      details.generated ? JSON.stringify(details.generated) : null,
      details.error?.code ?? null,
      details.error?.message ?? null,
      now.getTime(),
      taskId,
      ...fromStatuses,
      ...(details.anyAttempt ? [] : [attempt]),
    ) as { account_id: string; webhook_url: string | null } | undefined;
    if (!updated) return false;
    // Every status a task can finish from is active (terminal states are final), so the account
    // has one active task fewer. Floored at 0 so that no drift could ever stop a task finishing.
    this.statement('UPDATE accounts SET active_tasks = max(active_tasks - 1, 0) WHERE id = ?').run(updated.account_id);
    if (refundsOnEntry(target)) this.refundInTransaction(taskId, now);
    const eventType = webhookEventFor(target);
    if (updated.webhook_url && eventType) {
      this.statement(
        `INSERT INTO webhook_deliveries (id, account_id, task_id, event_type, url, status, next_attempt_at, event_at, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)`,
      ).run(
        newIdAt(now),
        updated.account_id,
        taskId,
        eventType,
        updated.webhook_url,
        now.getTime(),
        now.getTime(),
        now.getTime(),
        now.getTime(),
      );
    }
    return true;
  }

  // ── webhooks ─────────────────────────────────────────────────────────────────────────────────

  async webhookSecrets(accountId: string, now: Date, newSecret: () => string): Promise<WebhookSecrets> {
    const existing = this.readWebhookSecrets(accountId, now);
    if (existing) return existing;
    return this.write(() => {
      // Two first calls may race; the unique index on the current secret lets one insert win.
      this.statement(
        'INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
      ).run(accountId, newSecret(), now.getTime());
      return this.readWebhookSecrets(accountId, now)!;
    });
  }

  async rotateWebhookSecret(
    accountId: string,
    now: Date,
    graceMs: number,
    newSecret: () => string,
  ): Promise<WebhookSecrets> {
    return this.write(() => {
      this.statement('DELETE FROM webhook_secrets WHERE account_id = ? AND retired_at IS NOT NULL').run(accountId);
      this.statement(
        'UPDATE webhook_secrets SET retired_at = ?, expires_at = ? WHERE account_id = ? AND retired_at IS NULL',
      ).run(now.getTime(), now.getTime() + graceMs, accountId);
      this.statement('INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES (?, ?, ?)').run(
        accountId,
        newSecret(),
        now.getTime(),
      );
      return this.readWebhookSecrets(accountId, now)!;
    });
  }

  private readWebhookSecrets(accountId: string, now: Date): WebhookSecrets | null {
    const rows = this.statement(
      'SELECT secret, retired_at, expires_at FROM webhook_secrets WHERE account_id = ? AND (retired_at IS NULL OR expires_at > ?)',
    ).all(accountId, now.getTime()) as { secret: string; retired_at: number | null; expires_at: number | null }[];
    const current = rows.find((r) => r.retired_at === null);
    if (!current) return null;
    const previous = rows.find((r) => r.retired_at !== null);
    return {
      current: current.secret,
      previous: previous?.secret ?? null,
      previousExpiresAt: previous ? new Date(previous.expires_at!) : null,
    };
  }

  async claimDueWebhookDelivery(now: Date, leaseMs: number): Promise<WebhookDelivery | null> {
    const row = this.writeUnsynced(
      () =>
        this.statement(
          `UPDATE webhook_deliveries SET next_attempt_at = ?, updated_at = ?
             WHERE id = (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT 1)
             RETURNING *`,
        ).get(now.getTime() + leaseMs, now.getTime(), now.getTime()) as WebhookDeliveryRow | undefined,
    );
    return row ? toWebhookDelivery(row) : null;
  }

  async recordWebhookAttempt(input: WebhookAttemptOutcome): Promise<void> {
    const { attempt } = input;
    // Reported to the account (the delivery log), so synced; in the group commit, so that a
    // dispatcher in the API's process does not hold its event loop for a sync of its own.
    await this.groupCommit(
      () => {
        this.statement(
          'INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?)',
        ).run(input.deliveryId, attempt.attemptedAt.getTime(), attempt.statusCode, attempt.error, attempt.durationMs);
        this.statement(
          `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, scheduled_attempts = scheduled_attempts + ?,
             manual_attempt = 0, resume_at = NULL, next_attempt_at = ?, last_status_code = ?, last_error = ?, updated_at = ?
           WHERE id = ?`,
        ).run(
          input.status,
          input.manual ? 0 : 1,
          msOrNull(input.nextAttemptAt),
          attempt.statusCode,
          attempt.error,
          input.now.getTime(),
          input.deliveryId,
        );
      },
      { durable: true },
    );
  }

  async listWebhookDeliveries(
    accountId: string,
    query: { limit: number; cursor?: string; taskId?: string; status?: WebhookDeliveryStatus },
  ): Promise<Page<WebhookDeliveryWithAttempts>> {
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {
      task_id: query.taskId,
      status: query.status,
    });
    const rows = this.statement(
      `SELECT * FROM webhook_deliveries WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`,
    ).all({ ...params, limit: pageFetchSize(query.limit) }) as WebhookDeliveryRow[];
    const page = pageOf(rows, query.limit, (r) => r.id);
    return { items: page.items.map((r) => this.withAttempts(r)), nextCursor: page.nextCursor };
  }

  async replayWebhookDelivery(accountId: string, deliveryId: string, now: Date): Promise<WebhookDeliveryWithAttempts> {
    const row = this.write(
      () =>
        this.statement(
          // The scheduled attempt this one goes ahead of is kept (a second manual retry keeps the
          // first one's), so that a failed manual retry leaves the schedule where it was.
          `UPDATE webhook_deliveries SET
               resume_at = CASE WHEN manual_attempt = 1 THEN resume_at WHEN status = 'pending' THEN next_attempt_at END,
               manual_attempt = 1, status = 'pending', next_attempt_at = ?, updated_at = ?
             WHERE id = ? AND account_id = ? RETURNING *`,
        ).get(now.getTime(), now.getTime(), deliveryId, accountId) as WebhookDeliveryRow | undefined,
    );
    if (!row) throw new DomainError('not_found', 'Webhook delivery not found.');
    return this.withAttempts(row);
  }

  private withAttempts(row: WebhookDeliveryRow): WebhookDeliveryWithAttempts {
    const attempts = this.statement(
      'SELECT attempted_at, status_code, error, duration_ms FROM webhook_attempts WHERE delivery_id = ? ORDER BY id',
    ).all(row.id) as { attempted_at: number; status_code: number | null; error: string | null; duration_ms: number }[];
    return {
      ...toWebhookDelivery(row),
      attemptLog: attempts.map((a) => ({
        attemptedAt: new Date(a.attempted_at),
        statusCode: a.status_code,
        error: a.error,
        durationMs: a.duration_ms,
      })),
    };
  }
}

interface WebhookDeliveryRow {
  id: string;
  account_id: string;
  task_id: string;
  event_type: WebhookEventType;
  url: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  scheduled_attempts: number;
  manual_attempt: number;
  resume_at: number | null;
  next_attempt_at: number | null;
  event_at: number;
  created_at: number;
}

const toWebhookDelivery = (r: WebhookDeliveryRow): WebhookDelivery => ({
  id: r.id,
  accountId: r.account_id,
  taskId: r.task_id,
  eventType: r.event_type,
  url: r.url,
  status: r.status,
  attempts: r.attempts,
  scheduledAttempts: r.scheduled_attempts,
  manualRetry: r.manual_attempt ? { resumeAt: r.resume_at === null ? null : new Date(r.resume_at) } : null,
  nextAttemptAt: r.next_attempt_at === null ? null : new Date(r.next_attempt_at),
  eventAt: new Date(r.event_at),
  createdAt: new Date(r.created_at),
});

class BlobReservationLapsedError extends Error {
  constructor(blobKey: string) {
    super(`The reservation of blob ${blobKey} lapsed before its media row was written.`);
  }
}

interface IdempotencyKeyRow {
  account_id: string;
  key: string;
  fingerprint: string;
  status: 'in_flight' | 'completed';
  lease_token: string | null;
  lease_expires_at: number | null;
  response_status: number | null;
  response_headers: string | null;
  response_body: Buffer | null;
  created_at: number;
  expires_at: number;
}
