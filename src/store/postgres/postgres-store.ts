import pg from 'pg';
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
  type TaskEvent,
  type TaskRecord,
  type TaskStatus,
} from '../../core/task.js';
import { newIdAt, uuidv7Floor } from '../../ids.js';
import { decodeCursor } from '../cursor.js';
import { newestFirstKeyset, pageFetchSize, pageOf } from '../paging.js';
import type {
  Account,
  ApiKeyRecord,
  ClaimPolicy,
  GeneratedMediaInput,
  IdempotencyClaim,
  IdempotencyClaimRequest,
  IdempotencyCompletion,
  LedgerEntry,
  LedgerKind,
  MediaRecord,
  Page,
  Store,
  TaskCreationLimits,
  TaskListQuery,
  WebhookAttemptOutcome,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookDeliveryWithAttempts,
  WebhookSecrets,
} from '../port.js';
import { POSTGRES_MIGRATIONS } from './migrations.js';
import {
  mediaValues,
  TASK_COLUMNS,
  taskValues,
  toAccount,
  toApiKey,
  toLedgerEntry,
  toMedia,
  toTask,
  toWebhookDelivery,
  type AccountRow,
  type ApiKeyRow,
  type LedgerRow,
  type MediaRow,
  type TaskRow,
  type WebhookDeliveryRow,
} from './rows.js';
import { CHANNEL_SQL, TaskSignals, type TaskSignal } from './task-signals.js';

/** One connection of the pool, inside a transaction. */
type Tx = pg.PoolClient;

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
 * The scale-out store: PostgreSQL through a pool of connections, shared by any number of API and
 * worker processes. Correctness rests on row locks and conditional updates, never on a single
 * writer: a debit is `UPDATE … WHERE balance >= cost`, the cap `UPDATE … WHERE active_tasks < cap`,
 * a claim `FOR UPDATE SKIP LOCKED`, and every finishing write is fenced by the attempt number.
 * Locks are always taken task row first, then account row, so that transactions never deadlock.
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  private readonly pool: pg.Pool;
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly schema: string | undefined;
  /** Cross-process signals (LISTEN/NOTIFY); started by listen(). */
  private signals: TaskSignals | null = null;

  constructor(private readonly options: PostgresStoreOptions) {
    this.schema = options.schema;
    if (this.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(this.schema))
      throw new Error(`Invalid schema name ${this.schema}`);
    this.pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.poolSize ?? 10,
      types,
      ...(this.schema ? { options: `-c search_path=${this.schema}` } : {}),
    });
    // An idle connection that the server drops is replaced on next use; it must not crash the process.
    this.pool.on('error', () => {});
  }

  /** Runs op, counted so that close() waits for it. */
  private track<T>(op: Promise<T>): Promise<T> {
    this.inFlight.add(op);
    const forget = () => this.inFlight.delete(op);
    op.then(forget, forget);
    return op;
  }

  private query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    return this.track(this.pool.query<R>(sql, params));
  }

  /**
   * Runs fn in one transaction (READ COMMITTED: every conflict is settled by a row lock or a
   * conditional update), again from the start after a deadlock or serialization failure.
   * unsynced: the commit does not wait for the WAL flush, for bookkeeping no client is told about
   * (claims, leases), as the SQLite store's writeUnsynced; a crash of the server may undo it whole.
   */
  private transaction<T>(fn: (tx: Tx) => Promise<T>, options: { unsynced?: boolean } = {}): Promise<T> {
    return this.track(
      (async () => {
        for (let attempt = 1; ; attempt++) {
          const client = await this.pool.connect();
          try {
            await client.query(options.unsynced ? 'BEGIN; SET LOCAL synchronous_commit = off' : 'BEGIN');
            const result = await fn(client);
            await client.query('COMMIT');
            return result;
          } catch (error) {
            await client.query('ROLLBACK').catch(() => {});
            const code = (error as { code?: string }).code;
            if (code && RETRIED_SQLSTATES.has(code) && attempt < MAX_TRANSACTION_ATTEMPTS) continue;
            throw error;
          } finally {
            client.release();
          }
        }
      })(),
    );
  }

  async migrate(): Promise<void> {
    const client = await this.pool.connect();
    try {
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
    } finally {
      client.release();
    }
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  private closing: Promise<void> | null = null;

  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    // Work already started (a create whose 202 is on its way) is committed, not cut off.
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.signals?.close();
    await this.pool.end();
  }

  /**
   * Subscribes to task signals from every process on this database (LISTEN on a connection of its
   * own). The store then raises them itself in the transactions that create and change tasks.
   */
  async listen(onSignal: (signal: TaskSignal) => void): Promise<void> {
    this.signals ??= new TaskSignals(this.options.connectionString, this.schema);
    await this.signals.listen(onSignal);
  }

  /** A secret every process of the cluster shares; the first process to ask makes it. */
  async sharedSecret(name: string, newSecret: () => string): Promise<string> {
    const { rows } = await this.query<{ secret: string }>(
      `INSERT INTO service_secrets (name, secret, created_at) VALUES ($1, $2, now())
       ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING secret`,
      [name, newSecret()],
    );
    return rows[0].secret;
  }

  // ── accounts and ledger ──────────────────────────────────────────────────────────────────────

  async createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account> {
    return this.transaction(async (tx) => {
      await tx.query('INSERT INTO accounts (id, name, balance, created_at) VALUES ($1, $2, 0, $3)', [
        input.id,
        input.name,
        input.now,
      ]);
      if (input.initialTokens > 0)
        await addLedgerEntry(tx, input.id, 'grant', input.initialTokens, null, 'opening balance', input.now);
      return requireAccount(tx, input.id);
    });
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const { rows } = await this.query<AccountRow>('SELECT id, name, balance, created_at FROM accounts WHERE id = $1', [
      accountId,
    ]);
    return rows[0] ? toAccount(rows[0]) : null;
  }

  async countAccounts(): Promise<number> {
    const { rows } = await this.query<{ n: number }>('SELECT count(*) AS n FROM accounts');
    return rows[0].n;
  }

  async grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account> {
    return this.transaction(async (tx) => {
      if (!(await addLedgerEntry(tx, input.accountId, 'grant', input.amount, null, input.note, input.now))) {
        throw new DomainError('not_found', 'Account not found.');
      }
      return requireAccount(tx, input.accountId);
    });
  }

  async listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    const before = query.cursor ? Number(decodeCursor(query.cursor)) : Number.MAX_SAFE_INTEGER;
    const { rows } = await this.query<LedgerRow>(
      'SELECT * FROM ledger WHERE account_id = $1 AND account_seq < $2 ORDER BY account_seq DESC LIMIT $3',
      [accountId, Number.isSafeInteger(before) ? before : 0, pageFetchSize(query.limit)],
    );
    return pageOf(rows.map(toLedgerEntry), query.limit, (e) => e.id);
  }

  async ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>> {
    const { rows } = await this.query<{ kind: LedgerKind; total: number }>(
      'SELECT kind, sum(amount)::bigint AS total FROM ledger WHERE account_id = $1 GROUP BY kind',
      [accountId],
    );
    const totals: Record<LedgerKind, number> = { grant: 0, debit: 0, refund: 0 };
    for (const row of rows) totals[row.kind] = row.total;
    return totals;
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
    const { rows } = await this.query<ApiKeyRow>(
      `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING id, account_id, name, prefix, created_at, last_used_at, revoked_at`,
      [input.id, input.accountId, input.name, input.prefix, input.hash, input.now],
    );
    return toApiKey(rows[0]);
  }

  async findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const { rows } = await this.query<
      ApiKeyRow & { account_name: string; account_balance: number; account_created_at: Date }
    >(
      `SELECT k.id, k.account_id, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at,
              a.name AS account_name, a.balance AS account_balance, a.created_at AS account_created_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
       WHERE k.hash = $1 AND k.revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
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
    const columns = 'id, account_id, name, prefix, created_at, last_used_at, revoked_at';
    const { rows } = accountId
      ? await this.query<ApiKeyRow>(`SELECT ${columns} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`, [
          accountId,
        ])
      : await this.query<ApiKeyRow>(`SELECT ${columns} FROM api_keys ORDER BY created_at, id`);
    return rows.map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = await this.query(
      'UPDATE api_keys SET revoked_at = $1 WHERE (id = $2 OR prefix = $2) AND revoked_at IS NULL',
      [now, idOrPrefix],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async markApiKeyUsed(keyId: string, now: Date): Promise<void> {
    await this.query('UPDATE api_keys SET last_used_at = $1 WHERE id = $2', [now, keyId]);
  }

  // ── tasks ────────────────────────────────────────────────────────────────────────────────────

  async insertTaskWithDebit(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    await this.transaction(async (tx) => {
      await assertReferencesUsable(tx, task);
      if (countsAsActive(task.status)) {
        // The row lock this takes orders the account's concurrent creates; each sees the last one's count.
        const { rows } = await tx.query<{ active_tasks: number }>(
          'SELECT active_tasks FROM accounts WHERE id = $1 FOR UPDATE',
          [task.accountId],
        );
        if (rows[0] && !admitsAnotherActiveTask(rows[0].active_tasks, limits.maxActiveTasks)) {
          throw new DomainError(
            'too_many_active_tasks',
            `An account may have at most ${limits.maxActiveTasks} active tasks.`,
          );
        }
      }
      if (!(await addLedgerEntry(tx, task.accountId, 'debit', task.cost, task.id, null, task.createdAt))) {
        throw new DomainError('insufficient_tokens', `This task costs ${task.cost} tokens; the balance is lower.`);
      }
      await tx.query(
        `INSERT INTO tasks (${TASK_COLUMNS}, run_after)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $17)`,
        taskValues(task),
      );
      if (completesKey && !(await completeIdempotencyKeyIn(tx, completesKey))) {
        throw new DomainError(
          'idempotency_in_progress',
          'Another request with this Idempotency-Key took it over; retry shortly.',
        );
      }
      if (countsAsActive(task.status)) {
        await tx.query('UPDATE accounts SET active_tasks = active_tasks + 1 WHERE id = $1', [task.accountId]);
        await notify(tx, { kind: 'created' });
      }
    });
  }

  async getTask(accountId: string, taskId: string): Promise<TaskRecord | null> {
    const { rows } = await this.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1 AND account_id = $2`, [
      taskId,
      accountId,
    ]);
    return rows[0] ? toTask(rows[0]) : null;
  }

  async getTaskById(taskId: string): Promise<TaskRecord | null> {
    const { rows } = await this.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [taskId]);
    return rows[0] ? toTask(rows[0]) : null;
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // One keyset range of (account_id, [status,] id) or (account_id, model, [status,] id): a page
    // costs the same at any depth. Time bounds become id bounds (UUIDv7 ids start with their millisecond).
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {
      status: query.status,
      model: query.model,
    });
    if (query.createdBefore) {
      conditions.push('id < @createdBefore');
      params.createdBefore = uuidv7Floor(query.createdBefore);
    }
    if (query.createdAfter) {
      conditions.push('id >= @createdAfter');
      params.createdAfter = uuidv7Floor(new Date(query.createdAfter.getTime() + 1));
    }
    params.limit = pageFetchSize(query.limit);
    const { sql, values } = numbered(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`,
      params,
    );
    const { rows } = await this.query<TaskRow>(sql, values);
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.transaction((tx) => refundIn(tx, taskId, now));
  }

  // ── media ────────────────────────────────────────────────────────────────────────────────────

  async scheduleBlobDeletion(blobKey: string, dueAt: Date): Promise<void> {
    await queueBlobDeletion(this.pool, blobKey, dueAt);
  }

  async insertMedia(media: MediaRecord, now: Date): Promise<boolean> {
    return this.transaction((tx) => insertMediaIn(tx, media, now));
  }

  async getMedia(accountId: string, mediaId: string, now: Date): Promise<MediaRecord | null> {
    const { rows } = await this.query<MediaRow>(
      'SELECT * FROM media WHERE id = $1 AND account_id = $2 AND expires_at > $3',
      [mediaId, accountId, now],
    );
    return rows[0] ? toMedia(rows[0]) : null;
  }

  async getMediaById(mediaId: string, now: Date): Promise<MediaRecord | null> {
    const { rows } = await this.query<MediaRow>('SELECT * FROM media WHERE id = $1 AND expires_at > $2', [
      mediaId,
      now,
    ]);
    return rows[0] ? toMedia(rows[0]) : null;
  }

  async deleteMedia(accountId: string, mediaId: string, now: Date): Promise<string | null> {
    return this.transaction(async (tx) => {
      const { rows } = await tx.query<{ blob_key: string; task_id: string | null }>(
        'DELETE FROM media WHERE id = $1 AND account_id = $2 AND expires_at > $3 RETURNING blob_key, task_id',
        [mediaId, accountId, now],
      );
      if (!rows[0]) return null;
      await queueBlobDeletion(tx, rows[0].blob_key, now);
      if (rows[0].task_id) await forgetGeneratedMedia(tx, rows[0].task_id, mediaId);
      return rows[0].blob_key;
    });
  }

  async deleteExpiredMedia(now: Date, limit: number): Promise<number> {
    return this.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string; blob_key: string; task_id: string | null }>(
        `DELETE FROM media WHERE id IN (SELECT id FROM media WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id, blob_key, task_id`,
        [now, limit],
      );
      for (const row of rows) {
        await queueBlobDeletion(tx, row.blob_key, now);
        if (row.task_id) await forgetGeneratedMedia(tx, row.task_id, row.id);
      }
      return rows.length;
    });
  }

  async listDueBlobDeletions(now: Date, limit: number): Promise<string[]> {
    const { rows } = await this.query<{ blob_key: string }>(
      'SELECT blob_key FROM blob_deletions WHERE due_at <= $1 ORDER BY due_at, blob_key LIMIT $2',
      [now, limit],
    );
    return rows.map((r) => r.blob_key);
  }

  async completeBlobDeletion(blobKey: string, now: Date): Promise<void> {
    await this.query('DELETE FROM blob_deletions WHERE blob_key = $1 AND due_at <= $2', [blobKey, now]);
  }

  // ── idempotency keys ─────────────────────────────────────────────────────────────────────────

  async claimIdempotencyKey(input: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const now = input.now.getTime();
    const leaseExpiresAt = new Date(now + input.leaseMs);
    return this.transaction(
      async (tx): Promise<IdempotencyClaim> => {
        const inserted = await tx.query(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
         VALUES ($1, $2, $3, 'in_flight', $4, $5, $6, $7) ON CONFLICT (account_id, key) DO NOTHING`,
          [
            input.accountId,
            input.key,
            input.fingerprint,
            input.leaseToken,
            leaseExpiresAt,
            input.now,
            new Date(now + input.ttlMs),
          ],
        );
        if (inserted.rowCount === 1) return { outcome: 'acquired' };
        const { rows } = await tx.query<{
          fingerprint: string;
          status: 'in_flight' | 'completed';
          lease_expires_at: Date | null;
          expires_at: Date;
          response_status: number | null;
          response_headers: Record<string, string> | null;
          response_body: Buffer | null;
        }>(
          `SELECT fingerprint, status, lease_expires_at, expires_at, response_status, response_headers, response_body
         FROM idempotency_keys WHERE account_id = $1 AND key = $2 FOR UPDATE`,
          [input.accountId, input.key],
        );
        const row = rows[0];
        if (row && row.expires_at.getTime() > now) {
          if (row.fingerprint !== input.fingerprint) return { outcome: 'fingerprint_mismatch' };
          if (row.status === 'completed') {
            return {
              outcome: 'replay',
              response: {
                statusCode: row.response_status!,
                headers: row.response_headers ?? {},
                body: row.response_body ?? Buffer.alloc(0),
              },
            };
          }
          if ((row.lease_expires_at?.getTime() ?? 0) > now) return { outcome: 'in_progress' };
          // The holder's lease ran out: this request takes over; expires_at stays 24 h from first use.
          await tx.query(
            'UPDATE idempotency_keys SET lease_token = $3, lease_expires_at = $4 WHERE account_id = $1 AND key = $2',
            [input.accountId, input.key, input.leaseToken, leaseExpiresAt],
          );
          return { outcome: 'acquired' };
        }
        // Expired (or swept between the two statements): the key starts a new life.
        await tx.query(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at, created_at, expires_at)
         VALUES ($1, $2, $3, 'in_flight', $4, $5, $6, $7)
         ON CONFLICT (account_id, key) DO UPDATE SET
           fingerprint = excluded.fingerprint, status = 'in_flight', lease_token = excluded.lease_token,
           lease_expires_at = excluded.lease_expires_at, response_status = NULL, response_headers = NULL,
           response_body = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at`,
          [
            input.accountId,
            input.key,
            input.fingerprint,
            input.leaseToken,
            leaseExpiresAt,
            input.now,
            new Date(now + input.ttlMs),
          ],
        );
        return { outcome: 'acquired' };
      },
      { unsynced: true },
    );
  }

  async completeIdempotencyKey(input: IdempotencyCompletion): Promise<boolean> {
    return this.transaction((tx) => completeIdempotencyKeyIn(tx, input));
  }

  async renewIdempotencyKey(input: {
    accountId: string;
    key: string;
    leaseToken: string;
    leaseExpiresAt: Date;
  }): Promise<boolean> {
    const result = await this.query(
      "UPDATE idempotency_keys SET lease_expires_at = $1 WHERE account_id = $2 AND key = $3 AND status = 'in_flight' AND lease_token = $4",
      [input.leaseExpiresAt, input.accountId, input.key, input.leaseToken],
    );
    return result.rowCount === 1;
  }

  async releaseIdempotencyKey(input: { accountId: string; key: string; leaseToken: string }): Promise<void> {
    await this.query(
      "DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_flight' AND lease_token = $3",
      [input.accountId, input.key, input.leaseToken],
    );
  }

  async deleteExpiredIdempotencyKeys(now: Date, limit: number): Promise<number> {
    const result = await this.query(
      `DELETE FROM idempotency_keys WHERE (account_id, key) IN
         (SELECT account_id, key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [now, limit],
    );
    return result.rowCount ?? 0;
  }

  // ── task execution (the tasks table is the queue) ────────────────────────────────────────────

  async claimNextTask(policy: ClaimPolicy): Promise<TaskRecord | null> {
    const { now } = policy;
    return this.transaction(
      async (tx) => {
        // Lost leases first; SKIP LOCKED leaves those another claimer is handling to it.
        const lost = await tx.query<{ id: string; attempt: number }>(
          "SELECT id, attempt FROM tasks WHERE status = 'IN_PROGRESS' AND lease_expires_at < $1 FOR UPDATE SKIP LOCKED",
          [now],
        );
        for (const task of lost.rows) {
          const outcome = afterLostLease(task.attempt, policy.maxAttempts);
          if (outcome.action === 'fail')
            await finishIn(tx, task.id, task.attempt, 'fail', now, { error: outcome.error });
          else await requeueIn(tx, task.id, task.attempt, now);
        }
        for (;;) {
          const { rows } = await tx.query<{ id: string; attempt: number; created_at: Date }>(
            `SELECT id, attempt, created_at FROM tasks WHERE status = 'CREATED' AND run_after <= $1
           ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`,
            [now],
          );
          const next = rows[0];
          if (!next) return null;
          if (isPastDeadline(next.created_at, now, policy.deadlineMs)) {
            await finishIn(tx, next.id, next.attempt, 'fail', now, {
              error: DEADLINE_EXCEEDED,
              fromStatuses: ['CREATED'],
            });
            continue;
          }
          const claimed = await tx.query<TaskRow>(
            `UPDATE tasks SET status = 'IN_PROGRESS', attempt = attempt + 1, lease_expires_at = $2, started_at = coalesce(started_at, $3)
           WHERE id = $1 RETURNING ${TASK_COLUMNS}`,
            [next.id, new Date(now.getTime() + policy.leaseMs), now],
          );
          return toTask(claimed.rows[0]);
        }
      },
      { unsynced: true },
    );
  }

  async renewLease(taskId: string, attempt: number, now: Date, leaseMs: number): Promise<boolean> {
    const result = await this.query(
      "UPDATE tasks SET lease_expires_at = $1 WHERE id = $2 AND attempt = $3 AND status = 'IN_PROGRESS'",
      [new Date(now.getTime() + leaseMs), taskId, attempt],
    );
    return result.rowCount === 1;
  }

  async completeTask(input: {
    taskId: string;
    attempt: number;
    media: GeneratedMediaInput[];
    now: Date;
  }): Promise<boolean> {
    try {
      return await this.transaction(async (tx) => {
        const generated: GeneratedMediaRef[] = input.media.map(generatedMediaRef);
        const finished = await finishIn(tx, input.taskId, input.attempt, 'complete', input.now, { generated });
        if (!finished) return false;
        for (const m of input.media) {
          const media: MediaRecord = {
            ...m,
            accountId: finished.accountId,
            source: 'generated',
            taskId: input.taskId,
            createdAt: input.now,
          };
          // A blob whose reservation lapsed may already be swept: throwing rolls the whole completion back.
          if (!(await insertMediaIn(tx, media, input.now))) throw new BlobReservationLapsedError(m.blobKey);
        }
        return true;
      });
    } catch (error) {
      if (error instanceof BlobReservationLapsedError) return false;
      throw error;
    }
  }

  async failTask(input: {
    taskId: string;
    attempt: number;
    error: { code: string; message: string };
    now: Date;
  }): Promise<boolean> {
    return this.transaction(
      async (tx) =>
        (await finishIn(tx, input.taskId, input.attempt, 'fail', input.now, { error: input.error })) !== null,
    );
  }

  async requeueTask(input: { taskId: string; attempt: number; runAfter: Date; now: Date }): Promise<boolean> {
    return this.transaction((tx) => requeueIn(tx, input.taskId, input.attempt, input.runAfter));
  }

  async cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord> {
    return this.transaction(async (tx) => {
      const { rows } = await tx.query<{ status: TaskStatus; attempt: number }>(
        'SELECT status, attempt FROM tasks WHERE id = $1 AND account_id = $2 FOR UPDATE',
        [taskId, accountId],
      );
      if (!rows[0]) throw new DomainError('not_found', 'Task not found.');
      nextStatus(rows[0].status, 'cancel'); // throws invalid_state for a terminal task
      await finishIn(tx, taskId, rows[0].attempt, 'cancel', now, {
        fromStatuses: statusesAllowing('cancel'),
        anyAttempt: true,
      });
      const task = await tx.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [taskId]);
      return toTask(task.rows[0]);
    });
  }

  async mediaBlobKeys(accountId: string, mediaIds: string[]): Promise<Map<string, string>> {
    if (mediaIds.length === 0) return new Map();
    const { rows } = await this.query<{ id: string; blob_key: string }>(
      'SELECT id, blob_key FROM media WHERE account_id = $1 AND id = ANY($2::text[])',
      [accountId, mediaIds],
    );
    return new Map(rows.map((r) => [r.id, r.blob_key]));
  }

  // ── webhooks ─────────────────────────────────────────────────────────────────────────────────

  async webhookSecrets(accountId: string, now: Date, newSecret: () => string): Promise<WebhookSecrets> {
    const existing = await this.readWebhookSecrets(this.pool, accountId, now);
    if (existing) return existing;
    // Two first calls may race; the unique index on the current secret lets one insert win.
    await this.query(
      `INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES ($1, $2, $3)
       ON CONFLICT (account_id) WHERE retired_at IS NULL DO NOTHING`,
      [accountId, newSecret(), now],
    );
    return (await this.readWebhookSecrets(this.pool, accountId, now))!;
  }

  async rotateWebhookSecret(
    accountId: string,
    now: Date,
    graceMs: number,
    newSecret: () => string,
  ): Promise<WebhookSecrets> {
    return this.transaction(async (tx) => {
      await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
      await tx.query('DELETE FROM webhook_secrets WHERE account_id = $1 AND retired_at IS NOT NULL', [accountId]);
      await tx.query(
        'UPDATE webhook_secrets SET retired_at = $1, expires_at = $2 WHERE account_id = $3 AND retired_at IS NULL',
        [now, new Date(now.getTime() + graceMs), accountId],
      );
      await tx.query('INSERT INTO webhook_secrets (account_id, secret, created_at) VALUES ($1, $2, $3)', [
        accountId,
        newSecret(),
        now,
      ]);
      return (await this.readWebhookSecrets(tx, accountId, now))!;
    });
  }

  private async readWebhookSecrets(db: Queryable, accountId: string, now: Date): Promise<WebhookSecrets | null> {
    const { rows } = await db.query<{ secret: string; retired_at: Date | null; expires_at: Date | null }>(
      'SELECT secret, retired_at, expires_at FROM webhook_secrets WHERE account_id = $1 AND (retired_at IS NULL OR expires_at > $2)',
      [accountId, now],
    );
    const current = rows.find((r) => r.retired_at === null);
    if (!current) return null;
    const previous = rows.find((r) => r.retired_at !== null);
    return {
      current: current.secret,
      previous: previous?.secret ?? null,
      previousExpiresAt: previous?.expires_at ?? null,
    };
  }

  async claimDueWebhookDelivery(now: Date, leaseMs: number): Promise<WebhookDelivery | null> {
    const { rows } = await this.query<WebhookDeliveryRow>(
      `UPDATE webhook_deliveries SET next_attempt_at = $1, updated_at = $2
       WHERE id = (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $2
                   ORDER BY next_attempt_at LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [new Date(now.getTime() + leaseMs), now],
    );
    return rows[0] ? toWebhookDelivery(rows[0]) : null;
  }

  async recordWebhookAttempt(input: WebhookAttemptOutcome): Promise<void> {
    const { attempt } = input;
    await this.transaction(async (tx) => {
      await tx.query(
        'INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5)',
        [input.deliveryId, attempt.attemptedAt, attempt.statusCode, attempt.error, Math.round(attempt.durationMs)],
      );
      await tx.query(
        `UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, scheduled_attempts = scheduled_attempts + $7,
           manual_attempt = false, resume_at = NULL, next_attempt_at = $2, last_status_code = $3, last_error = $4,
           updated_at = $5 WHERE id = $6`,
        [
          input.status,
          input.nextAttemptAt,
          attempt.statusCode,
          attempt.error,
          input.now,
          input.deliveryId,
          input.manual ? 0 : 1,
        ],
      );
    });
  }

  async listWebhookDeliveries(
    accountId: string,
    query: { limit: number; cursor?: string; taskId?: string; status?: WebhookDeliveryStatus },
  ): Promise<Page<WebhookDeliveryWithAttempts>> {
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {
      task_id: query.taskId,
      status: query.status,
    });
    params.limit = pageFetchSize(query.limit);
    const { sql, values } = numbered(
      `SELECT * FROM webhook_deliveries WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`,
      params,
    );
    const { rows } = await this.query<WebhookDeliveryRow>(sql, values);
    const page = pageOf(rows, query.limit, (r) => r.id);
    return { items: await this.withAttempts(page.items), nextCursor: page.nextCursor };
  }

  async replayWebhookDelivery(accountId: string, deliveryId: string, now: Date): Promise<WebhookDeliveryWithAttempts> {
    const { rows } = await this.query<WebhookDeliveryRow>(
      // The scheduled attempt this one goes ahead of is kept (a second manual retry keeps the first
      // one's), so that a failed manual retry leaves the schedule where it was.
      `UPDATE webhook_deliveries SET
         resume_at = CASE WHEN manual_attempt THEN resume_at WHEN status = 'pending' THEN next_attempt_at END,
         manual_attempt = true, status = 'pending', next_attempt_at = $1, updated_at = $1
       WHERE id = $2 AND account_id = $3 RETURNING *`,
      [now, deliveryId, accountId],
    );
    if (!rows[0]) throw new DomainError('not_found', 'Webhook delivery not found.');
    return (await this.withAttempts(rows))[0];
  }

  private async withAttempts(rows: WebhookDeliveryRow[]): Promise<WebhookDeliveryWithAttempts[]> {
    if (rows.length === 0) return [];
    type AttemptRow = {
      delivery_id: string;
      attempted_at: Date;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
    };
    const { rows: attempts } = await this.query<AttemptRow>(
      `SELECT delivery_id, attempted_at, status_code, error, duration_ms FROM webhook_attempts
       WHERE delivery_id = ANY($1::text[]) ORDER BY id`,
      [rows.map((r) => r.id)],
    );
    return rows.map((row) => ({
      ...toWebhookDelivery(row),
      attemptLog: attempts
        .filter((a) => a.delivery_id === row.id)
        .map((a) => ({
          attemptedAt: a.attempted_at,
          statusCode: a.status_code,
          error: a.error,
          durationMs: a.duration_ms,
        })),
    }));
  }
}

type Queryable = Pick<pg.Pool, 'query'>;

class BlobReservationLapsedError extends Error {
  constructor(blobKey: string) {
    super(`The reservation of blob ${blobKey} lapsed before its media row was written.`);
  }
}

function ignoreConcurrentCreate(error: { code?: string }): void {
  // Two processes creating the same schema at once: one of them gets a unique violation.
  if (error.code !== '23505' && error.code !== '42P06') throw error;
}

/** SQL with @name placeholders (as newestFirstKeyset writes them) as $n placeholders and their values. */
function numbered(sql: string, params: Record<string, unknown>): { sql: string; values: unknown[] } {
  const names: string[] = [];
  const text = sql.replace(/@([a-zA-Z_][a-zA-Z0-9_]*)/g, (_, name: string) => {
    let index = names.indexOf(name);
    if (index === -1) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { sql: text, values: names.map((name) => params[name]) };
}

/** Raises a task signal when the transaction commits (NOTIFY is delivered at commit, never for a rollback). */
async function notify(tx: Tx, signal: TaskSignal): Promise<void> {
  await tx.query(`SELECT pg_notify(${CHANNEL_SQL}, $1)`, [TaskSignals.payload(signal)]);
}

async function requireAccount(tx: Tx, accountId: string): Promise<Account> {
  const { rows } = await tx.query<AccountRow>('SELECT id, name, balance, created_at FROM accounts WHERE id = $1', [
    accountId,
  ]);
  return toAccount(rows[0]);
}

/**
 * Moves the balance and records why, in the caller's transaction. The conditional update takes
 * the account's row lock, so the ledger ids of one account follow the order of its balances.
 * False when the account is missing or a debit would go negative.
 */
async function addLedgerEntry(
  tx: Tx,
  accountId: string,
  kind: LedgerKind,
  amount: number,
  taskId: string | null,
  note: string | null,
  now: Date,
): Promise<boolean> {
  const delta = kind === 'debit' ? -amount : amount;
  const { rows } = await tx.query<{ balance: number }>(
    'UPDATE accounts SET balance = balance + $1 WHERE id = $2 AND balance + $1 >= 0 RETURNING balance',
    [delta, accountId],
  );
  if (!rows[0]) return false;
  // The next number of the account's own sequence, read under the row lock the update above took.
  await tx.query(
    `INSERT INTO ledger (account_id, account_seq, kind, amount, balance_after, task_id, note, created_at)
     VALUES ($1, (SELECT coalesce(max(account_seq), 0) + 1 FROM ledger WHERE account_id = $1), $2, $3, $4, $5, $6, $7)`,
    [accountId, kind, amount, rows[0].balance, taskId, note, now],
  );
  return true;
}

/** A generated image that is gone leaves its task's `generated` list, rather than stay there with a URL that 404s. */
async function forgetGeneratedMedia(tx: Tx, taskId: string, mediaId: string): Promise<void> {
  await tx.query(
    `UPDATE tasks SET generated = (SELECT coalesce(json_agg(item), '[]'::json) FROM json_array_elements(generated) AS item
                                   WHERE item->>'media_id' <> $2)
     WHERE id = $1`,
    [taskId, mediaId],
  );
}

/** Every image reference must be an upload of the task's account, unexpired when the task is created. */
async function assertReferencesUsable(tx: Tx, task: TaskRecord): Promise<void> {
  if (task.imageReference.length === 0) return;
  // FOR SHARE: a delete of one of these uploads waits for this create, or this create sees it gone.
  const { rows } = await tx.query<{ id: string }>(
    "SELECT id FROM media WHERE account_id = $1 AND source = 'upload' AND expires_at > $2 AND id = ANY($3::text[]) FOR SHARE",
    [task.accountId, task.createdAt, task.imageReference],
  );
  const usable = new Set(rows.map((r) => r.id));
  const badIndex = task.imageReference.findIndex((id) => !usable.has(id));
  if (badIndex !== -1) throw invalidMediaReference(badIndex);
}

async function completeIdempotencyKeyIn(tx: Tx, input: IdempotencyCompletion): Promise<boolean> {
  const result = await tx.query(
    `UPDATE idempotency_keys SET status = 'completed', lease_token = NULL, lease_expires_at = NULL,
       response_status = $1, response_headers = $2, response_body = $3
     WHERE account_id = $4 AND key = $5 AND status = 'in_flight' AND lease_token = $6`,
    [
      input.response.statusCode,
      JSON.stringify(input.response.headers),
      input.response.body,
      input.accountId,
      input.key,
      input.leaseToken,
    ],
  );
  return (result.rowCount ?? 0) > 0;
}

async function queueBlobDeletion(db: Queryable, blobKey: string, dueAt: Date): Promise<void> {
  await db.query(
    'INSERT INTO blob_deletions (blob_key, due_at) VALUES ($1, $2) ON CONFLICT (blob_key) DO UPDATE SET due_at = excluded.due_at',
    [blobKey, dueAt],
  );
}

/** Takes back the blob's reservation and inserts the row; false (nothing written) without a live reservation. */
async function insertMediaIn(tx: Tx, media: MediaRecord, now: Date): Promise<boolean> {
  const reserved = await tx.query('DELETE FROM blob_deletions WHERE blob_key = $1 AND due_at > $2', [
    media.blobKey,
    now,
  ]);
  if (reserved.rowCount === 0) return false;
  await tx.query(
    `INSERT INTO media (id, account_id, source, content_type, width, height, size_bytes, sha256, blob_key, task_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    mediaValues(media),
  );
  return true;
}

async function requeueIn(tx: Tx, taskId: string, attempt: number, runAfter: Date): Promise<boolean> {
  const result = await tx.query(
    "UPDATE tasks SET status = 'CREATED', lease_expires_at = NULL, run_after = $1 WHERE id = $2 AND attempt = $3 AND status = 'IN_PROGRESS'",
    [runAfter, taskId, attempt],
  );
  if (result.rowCount !== 1) return false;
  await notify(tx, { kind: 'created' });
  return true;
}

async function refundIn(tx: Tx, taskId: string, now: Date): Promise<boolean> {
  // The task's row lock makes concurrent refunds of one task take turns; the second sees the first's entry.
  const { rows } = await tx.query<{ account_id: string; cost: number }>(
    'SELECT account_id, cost FROM tasks WHERE id = $1 FOR UPDATE',
    [taskId],
  );
  if (!rows[0]) return false;
  const refunded = await tx.query("SELECT 1 FROM ledger WHERE task_id = $1 AND kind = 'refund'", [taskId]);
  if (refunded.rowCount) return false;
  return addLedgerEntry(tx, rows[0].account_id, 'refund', rows[0].cost, taskId, null, now);
}

/**
 * Moves a task into a terminal state if it is still where `event` may start from (by default
 * IN_PROGRESS under this attempt), refunding and enqueueing the webhook event with it. Returns the
 * task's account, or null when the task was not there to move (fenced out).
 */
async function finishIn(
  tx: Tx,
  taskId: string,
  attempt: number,
  event: Extract<TaskEvent, 'complete' | 'fail' | 'cancel'>,
  now: Date,
  details: {
    generated?: GeneratedMediaRef[];
    error?: { code: string; message: string };
    fromStatuses?: TaskStatus[];
    anyAttempt?: boolean;
  },
): Promise<{ accountId: string } | null> {
  const fromStatuses = details.fromStatuses ?? ['IN_PROGRESS'];
  const target = nextStatus(fromStatuses[0], event);
  const { rows } = await tx.query<{ account_id: string; webhook_url: string | null }>(
    `UPDATE tasks SET status = $1, generated = coalesce($2::json, generated), error_code = $3, error_message = $4,
       completed_at = $5, lease_expires_at = NULL
     WHERE id = $6 AND status = ANY($7::text[]) ${details.anyAttempt ? '' : 'AND attempt = $8'}
     RETURNING account_id, webhook_url`,
    [
      target,
      details.generated ? JSON.stringify(details.generated) : null,
      details.error?.code ?? null,
      details.error?.message ?? null,
      now,
      taskId,
      fromStatuses,
      ...(details.anyAttempt ? [] : [attempt]),
    ],
  );
  const updated = rows[0];
  if (!updated) return null;
  // Every status a task can finish from is active (terminal states are final): one active task fewer.
  await tx.query('UPDATE accounts SET active_tasks = greatest(active_tasks - 1, 0) WHERE id = $1', [
    updated.account_id,
  ]);
  if (refundsOnEntry(target)) await refundIn(tx, taskId, now);
  const eventType = webhookEventFor(target);
  if (updated.webhook_url && eventType) {
    await tx.query(
      `INSERT INTO webhook_deliveries (id, account_id, task_id, event_type, url, status, next_attempt_at, event_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6, $6, $6)`,
      [newIdAt(now), updated.account_id, taskId, eventType, updated.webhook_url, now],
    );
  }
  await notify(tx, { kind: 'changed', taskId });
  return { accountId: updated.account_id };
}
