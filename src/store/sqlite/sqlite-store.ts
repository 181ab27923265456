import Database from 'better-sqlite3';
import { DomainError } from '../../core/errors.js';
import type { TaskRecord } from '../../core/task.js';
import { uuidv7Floor } from '../../ids.js';
import type { Account, ApiKeyRecord, LedgerEntry, LedgerKind, Page, Store, TaskCreationLimits, TaskListQuery } from '../port.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import { fromTask, toAccount, toApiKey, toLedgerEntry, toTask, type AccountRow, type ApiKeyRow, type LedgerRow, type TaskRow } from './rows.js';

export interface SqliteStoreOptions {
  /** How long a writer waits for another process's lock before SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

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
    // FULL: a 202 promises the task exists, so its commit must survive power loss, not only a crash.
    this.db.pragma('synchronous = FULL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 10_000}`);
  }

  /** Runs fn in a BEGIN IMMEDIATE transaction. */
  protected write<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  protected get database(): Database.Database {
    return this.db;
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
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  // ── accounts and ledger ──────────────────────────────────────────────────────────────────────

  async createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account> {
    return this.write(() => {
      this.db
        .prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, 0, ?)')
        .run(input.id, input.name, input.now.getTime());
      if (input.initialTokens > 0) this.addLedgerEntry(input.id, 'grant', input.initialTokens, null, 'opening balance', input.now);
      return this.requireAccount(input.id);
    });
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const row = this.db.prepare('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow | undefined;
    return row ? toAccount(row) : null;
  }

  async countAccounts(): Promise<number> {
    return (this.db.prepare('SELECT count(*) AS n FROM accounts').get() as { n: number }).n;
  }

  async grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account> {
    return this.write(() => {
      if (!this.db.prepare('SELECT 1 FROM accounts WHERE id = ?').get(input.accountId)) throw new DomainError('not_found', 'Account not found.');
      this.addLedgerEntry(input.accountId, 'grant', input.amount, null, input.note, input.now);
      return this.requireAccount(input.accountId);
    });
  }

  async listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    const before = query.cursor ? Number(decodeCursor(query.cursor)) : Number.MAX_SAFE_INTEGER;
    const rows = this.db
      .prepare('SELECT * FROM ledger WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?')
      .all(accountId, before, query.limit + 1) as LedgerRow[];
    return pageOf(rows.map(toLedgerEntry), query.limit, (e) => e.id);
  }

  async ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>> {
    const rows = this.db
      .prepare('SELECT kind, sum(amount) AS total FROM ledger WHERE account_id = ? GROUP BY kind')
      .all(accountId) as { kind: LedgerKind; total: number }[];
    const totals: Record<LedgerKind, number> = { grant: 0, debit: 0, refund: 0 };
    for (const row of rows) totals[row.kind] = row.total;
    return totals;
  }

  /** Moves the balance and records why, in the caller's transaction. Returns false when a debit would go negative. */
  private addLedgerEntry(accountId: string, kind: LedgerKind, amount: number, taskId: string | null, note: string | null, now: Date): boolean {
    const delta = kind === 'debit' ? -amount : amount;
    const updated = this.db
      .prepare('UPDATE accounts SET balance = balance + ? WHERE id = ? AND balance + ? >= 0 RETURNING balance')
      .get(delta, accountId, delta) as { balance: number } | undefined;
    if (!updated) return false;
    this.db
      .prepare('INSERT INTO ledger (account_id, kind, amount, balance_after, task_id, note, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(accountId, kind, amount, updated.balance, taskId, note, now.getTime());
    return true;
  }

  private requireAccount(accountId: string): Account {
    return toAccount(this.db.prepare('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow);
  }

  // ── API keys ─────────────────────────────────────────────────────────────────────────────────

  async insertApiKey(input: { id: string; accountId: string; name: string; prefix: string; hash: string; now: Date }): Promise<ApiKeyRecord> {
    this.db
      .prepare('INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(input.id, input.accountId, input.name, input.prefix, input.hash, input.now.getTime());
    return toApiKey(this.db.prepare('SELECT * FROM api_keys WHERE id = ?').get(input.id) as ApiKeyRow);
  }

  async findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const row = this.db
      .prepare(
        `SELECT k.*, a.name AS account_name, a.balance AS account_balance, a.created_at AS account_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = ? AND k.revoked_at IS NULL`,
      )
      .get(hash) as (ApiKeyRow & { account_name: string; account_balance: number; account_created_at: number }) | undefined;
    if (!row) return null;
    return {
      key: toApiKey(row),
      account: toAccount({ id: row.account_id, name: row.account_name, balance: row.account_balance, created_at: row.account_created_at }),
    };
  }

  async listApiKeys(accountId?: string): Promise<ApiKeyRecord[]> {
    const rows = accountId
      ? this.db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at').all(accountId)
      : this.db.prepare('SELECT * FROM api_keys ORDER BY created_at').all();
    return (rows as ApiKeyRow[]).map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = this.db
      .prepare('UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR prefix = ?) AND revoked_at IS NULL')
      .run(now.getTime(), idOrPrefix, idOrPrefix);
    return result.changes > 0;
  }

  async markApiKeyUsed(keyId: string, now: Date): Promise<void> {
    this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now.getTime(), keyId);
  }

  // ── tasks ────────────────────────────────────────────────────────────────────────────────────

  async insertTaskWithDebit(task: TaskRecord, limits: TaskCreationLimits): Promise<void> {
    const row = fromTask(task);
    this.write(() => {
      const active = this.db
        .prepare("SELECT count(*) AS n FROM tasks WHERE account_id = ? AND status IN ('CREATED', 'IN_PROGRESS')")
        .get(task.accountId) as { n: number };
      if (active.n >= limits.maxActiveTasks) {
        throw new DomainError('too_many_active_tasks', `An account may have at most ${limits.maxActiveTasks} active tasks.`);
      }
      if (!this.addLedgerEntry(task.accountId, 'debit', task.cost, task.id, null, task.createdAt)) {
        throw new DomainError('insufficient_tokens', `This task costs ${task.cost} tokens; the balance is lower.`);
      }
      this.db
        .prepare(
          `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
             cost, webhook_url, generated, error_code, error_message, attempt, lease_expires_at, run_after, created_at, started_at, completed_at)
           VALUES (@id, @account_id, @status, @model, @prompt, @image_reference, @aspect_ratio, @resolution, @width, @height,
             @cost, @webhook_url, @generated, @error_code, @error_message, @attempt, @lease_expires_at, @run_after, @created_at, @started_at, @completed_at)`,
        )
        .run(row);
    });
  }

  async getTask(accountId: string, taskId: string): Promise<TaskRecord | null> {
    const row = this.db.prepare('SELECT * FROM tasks WHERE id = ? AND account_id = ?').get(taskId, accountId) as TaskRow | undefined;
    return row ? toTask(row) : null;
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // Time bounds become id bounds (UUIDv7 ids start with their creation millisecond), so every
    // filter walks one index in id order and a page costs the same at any depth.
    const conditions = ['account_id = @accountId', 'id < @before'];
    const params: Record<string, unknown> = { accountId, before: query.cursor ? decodeCursor(query.cursor) : 'g', limit: query.limit + 1 };
    if (query.createdBefore) {
      conditions.push('id < @createdBefore');
      params.createdBefore = uuidv7Floor(query.createdBefore);
    }
    if (query.createdAfter) {
      conditions.push('id >= @createdAfter');
      params.createdAfter = uuidv7Floor(new Date(query.createdAfter.getTime() + 1));
    }
    if (query.status) {
      conditions.push('status = @status');
      params.status = query.status;
    }
    if (query.model) {
      conditions.push('model = @model');
      params.model = query.model;
    }
    const rows = this.db
      .prepare(`SELECT * FROM tasks WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`)
      .all(params) as TaskRow[];
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  // ── media ────────────────────────────────────────────────────────────────────────────────────

  async findUsableUploads(accountId: string, mediaIds: string[], now: Date): Promise<Set<string>> {
    if (mediaIds.length === 0) return new Set();
    const placeholders = mediaIds.map(() => '?').join(', ');
    const rows = this.db
      .prepare(`SELECT id FROM media WHERE account_id = ? AND source = 'upload' AND expires_at > ? AND id IN (${placeholders})`)
      .all(accountId, now.getTime(), ...mediaIds) as { id: string }[];
    return new Set(rows.map((r) => r.id));
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.write(() => {
      const task = this.db.prepare('SELECT account_id, cost FROM tasks WHERE id = ?').get(taskId) as { account_id: string; cost: number } | undefined;
      if (!task) return false;
      // The unique (task_id, kind) index is the once-only guard; checking first keeps the balance untouched.
      if (this.db.prepare("SELECT 1 FROM ledger WHERE task_id = ? AND kind = 'refund'").get(taskId)) return false;
      return this.addLedgerEntry(task.account_id, 'refund', task.cost, taskId, null, now);
    });
  }
}

/** Rows were fetched with limit + 1 so that the presence of a next page needs no extra query. */
function pageOf<T>(items: T[], limit: number, positionOf: (item: T) => string): Page<T> {
  const hasMore = items.length > limit;
  const pageItems = hasMore ? items.slice(0, limit) : items;
  return { items: pageItems, nextCursor: hasMore ? encodeCursor(positionOf(pageItems[pageItems.length - 1])) : null };
}
