import {
  adjustmentBelowZero,
  adjustmentOf,
  balanceChange,
  ledgerTotals,
  replayedAdjustment,
} from '../../core/ledger.js';
import { budgetPeriodStart, UNSCOPED, type AccountStatus, type BudgetPeriod } from '../../core/key-scope.js';
import { decodeCursor } from '../cursor.js';
import { uuidv7Floor } from '../../ids.js';
import { notFound } from '../../core/errors.js';
import { refundOf, type Admission, type AdmittingAccount } from '../../core/task-admission.js';
import { newIdAt } from '../../ids.js';
import { decodeSequenceCursor } from '../cursor.js';
import { pageFetchSize, pageOf } from '../paging.js';
import type {
  NewLedgerEntry,
  Account,
  AccountListQuery,
  AccountStore,
  ApiKeyInsert,
  BalanceAdjustment,
  ApiKeyRecord,
  ApiKeyStore,
  LedgerEntry,
  LedgerKind,
  Page,
} from '../port.js';
import { toAccount, toApiKey, toLedgerEntry, type AccountRow, type ApiKeyRow, type LedgerRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { accountRanges, SPENDING_STATUSES } from './account-ranges.js';
import { textParameter } from './unplanned-parameters.js';

/** Accounts, their ledger and their API keys on the embedded store. */
export class SqliteAccounts implements AccountStore, ApiKeyStore {
  constructor(private readonly db: SqliteDatabase) {}

  async createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account> {
    return this.db.write(() => {
      this.db
        .statement('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, 0, ?)')
        .run(input.id, input.name, input.now.getTime());
      if (input.initialTokens > 0)
        addLedgerEntry(this.db, input.id, 'grant', input.initialTokens, null, 'opening balance', input.now);
      return this.requireAccount(input.id);
    });
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const row = this.db.statement('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow | undefined;
    return row ? toAccount(row) : null;
  }

  async countAccounts(): Promise<number> {
    return (this.db.statement('SELECT count(*) AS n FROM accounts').get() as { n: number }).n;
  }

  async grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account> {
    return this.db.write(() => {
      if (!addLedgerEntry(this.db, input.accountId, 'grant', input.amount, null, input.note, input.now))
        throw notFound('Account');
      return this.requireAccount(input.accountId);
    });
  }

  async listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    const before = query.cursor ? decodeSequenceCursor(query.cursor) : Number.MAX_SAFE_INTEGER;
    const rows = this.db
      .statement('SELECT * FROM ledger WHERE account_id = ? AND account_seq < ? ORDER BY account_seq DESC LIMIT ?')
      .all(accountId, before, query.limit + 1) as LedgerRow[];
    const page = pageOf(rows, query.limit, (r) => String(r.account_seq));
    return { items: page.items.map(toLedgerEntry), nextCursor: page.nextCursor };
  }

  async ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>> {
    const rows = this.db
      .statement('SELECT kind, sum(amount) AS total FROM ledger WHERE account_id = ? GROUP BY kind')
      .all(accountId) as { kind: LedgerKind; total: number }[];
    return ledgerTotals(rows);
  }

  private requireAccount(accountId: string): Account {
    return toAccount(this.db.statement('SELECT * FROM accounts WHERE id = ?').get(accountId) as AccountRow);
  }

  async listAccounts(query: AccountListQuery): Promise<Page<Account>> {
    const conditions = ['id < ?'];
    const params: unknown[] = [query.cursor ? decodeCursor(query.cursor) : 'g'];
    if (query.status) {
      conditions.push('status = ?');
      params.push(query.status);
    }
    if (query.q) {
      // LIKE is case-insensitive for ASCII in SQLite; the query's own wildcards are escaped.
      conditions.push("name LIKE ? ESCAPE '\\'");
      params.push(`%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    }
    const rows = this.db
      .statement(`SELECT * FROM accounts WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT ?`)
      .all(...params, pageFetchSize(query.limit)) as AccountRow[];
    return pageOf(rows.map(toAccount), query.limit, (a) => a.id);
  }

  async updateAccount(accountId: string, change: { name?: string; status?: AccountStatus }): Promise<Account | null> {
    const row = this.db
      .statement('UPDATE accounts SET name = coalesce(?, name), status = coalesce(?, status) WHERE id = ? RETURNING *')
      .get(change.name ?? null, change.status ?? null, accountId) as AccountRow | undefined;
    return row ? toAccount(row) : null;
  }

  async adjustBalance(input: BalanceAdjustment): Promise<{ entry: LedgerEntry; account: Account; replayed: boolean }> {
    return this.db.write(() => {
      if (!this.db.statement('SELECT 1 FROM accounts WHERE id = ?').get(input.accountId)) throw notFound('Account');
      const earlier = this.db
        .statement('SELECT * FROM ledger WHERE account_id = ? AND idempotency_key = ?')
        .get(input.accountId, input.idempotencyKey) as LedgerRow | undefined;
      if (earlier) {
        const entry = toLedgerEntry(earlier);
        replayedAdjustment(entry, input);
        return { entry, account: this.requireAccount(input.accountId), replayed: true };
      }
      const { kind, amount } = adjustmentOf(input.amount);
      if (!addLedgerEntry(this.db, input.accountId, kind, amount, null, input.note, input.now))
        throw adjustmentBelowZero();
      const row = this.db
        .statement(
          `UPDATE ledger SET reference = ?, idempotency_key = ?
           WHERE id = (SELECT id FROM ledger WHERE account_id = ? ORDER BY account_seq DESC LIMIT 1) RETURNING *`,
        )
        .get(input.reference, input.idempotencyKey, input.accountId) as LedgerRow;
      return { entry: toLedgerEntry(row), account: this.requireAccount(input.accountId), replayed: false };
    });
  }

  async getApiKey(keyId: string): Promise<ApiKeyRecord | null> {
    const row = this.db.statement('SELECT * FROM api_keys WHERE id = ?').get(keyId) as ApiKeyRow | undefined;
    return row ? toApiKey(row) : null;
  }

  async keySpentSince(keyId: string, since: Date): Promise<number> {
    // The key's tasks in its account's ranges of tasks_account_model_status, which includes the key,
    // status and cost (the key list's figure; a create reads its key's key_spend row instead).
    const row = this.db
      .statement(
        `SELECT coalesce(sum(cost), 0) AS spent FROM tasks
         WHERE ${accountRanges('(SELECT account_id FROM api_keys WHERE id = @keyId)', SPENDING_STATUSES)}
           AND id >= @since AND key_id = @keyId`,
      )
      .get({ since: uuidv7Floor(since), keyId }) as { spent: number };
    return row.spent;
  }

  async insertApiKey(input: ApiKeyInsert): Promise<ApiKeyRecord> {
    const scope = input.scope ?? UNSCOPED;
    this.db
      .statement(
        `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, models, budget_tokens, budget_period,
           creates_per_min, requests_per_min, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        input.id,
        input.accountId,
        input.name,
        input.prefix,
        input.hash,
        input.now.getTime(),
        scope.models === null ? null : JSON.stringify(scope.models),
        scope.tokenBudget?.tokens ?? null,
        scope.tokenBudget?.period ?? null,
        scope.rateLimits.createsPerMin,
        scope.rateLimits.requestsPerMin,
        scope.expiresAt?.getTime() ?? null,
      );
    return toApiKey(this.db.statement('SELECT * FROM api_keys WHERE id = ?').get(input.id) as ApiKeyRow);
  }

  async findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const row = this.db
      .statement(
        `SELECT k.*, a.name AS account_name, a.balance AS account_balance, a.status AS account_status,
           a.created_at AS account_created_at
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
         WHERE k.hash = ${textParameter('?')} AND k.revoked_at IS NULL`,
      )
      .get(hash) as
      | (ApiKeyRow & {
          account_name: string;
          account_balance: number;
          account_status: AccountStatus;
          account_created_at: number;
        })
      | undefined;
    if (!row) return null;
    return {
      key: toApiKey(row),
      account: toAccount({
        id: row.account_id,
        name: row.account_name,
        balance: row.account_balance,
        status: row.account_status,
        created_at: row.account_created_at,
      }),
    };
  }

  async listApiKeys(accountId?: string): Promise<ApiKeyRecord[]> {
    const rows = accountId
      ? this.db.statement('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(accountId)
      : this.db.statement('SELECT * FROM api_keys ORDER BY created_at, id').all();
    return (rows as ApiKeyRow[]).map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = this.db
      .statement('UPDATE api_keys SET revoked_at = ? WHERE (id = ? OR prefix = ?) AND revoked_at IS NULL')
      .run(now.getTime(), idOrPrefix, idOrPrefix);
    return result.changes > 0;
  }

  async markApiKeyUsed(keyId: string, now: Date): Promise<void> {
    // Informational, and on the request path once a minute per key: unsynced, in the turn's batch
    // rather than in a transaction of its own.
    await this.db.groupCommit(
      () => {
        this.db.statement('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now.getTime(), keyId);
      },
      { durable: false },
    );
  }
}

/**
 * Moves the balance and records why, in the caller's transaction. Returns false when the account
 * is missing or a debit would go negative.
 */
export function addLedgerEntry(
  db: SqliteDatabase,
  accountId: string,
  kind: LedgerKind,
  amount: number,
  taskId: string | null,
  note: string | null,
  now: Date,
): boolean {
  const delta = balanceChange(kind, amount);
  const updated = db
    .statement('UPDATE accounts SET balance = balance + ? WHERE id = ? AND balance + ? >= 0 RETURNING balance')
    .get(delta, accountId, delta) as { balance: number } | undefined;
  if (!updated) return false;
  insertLedgerRow(db, accountId, { kind, amount, balanceAfter: updated.balance, taskId, note, at: now });
  return true;
}

/** One ledger row, next in the account's own sequence; the write transaction serialises the read of it. */
function insertLedgerRow(db: SqliteDatabase, accountId: string, entry: NewLedgerEntry): void {
  db.statement(
    `INSERT INTO ledger (account_id, account_seq, entry_id, kind, amount, balance_after, task_id, note, created_at)
       VALUES (?, (SELECT coalesce(max(account_seq), 0) + 1 FROM ledger WHERE account_id = ${textParameter('?')}), ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    accountId,
    accountId,
    newIdAt(entry.at),
    entry.kind,
    entry.amount,
    entry.balanceAfter,
    entry.taskId,
    entry.note,
    entry.at.getTime(),
  );
}

/**
 * The account's row as an admission reads it (core admitTasks); null for a missing account. SQLite
 * keeps the active-task count on the row: its one writer makes the row no point of contention, and
 * an admission then reads one row however many tasks the account has (PostgreSQL, whose finishes
 * run side by side, counts the tasks instead: decision 0030).
 */
export function admittingAccountIn(db: SqliteDatabase, accountId: string): AdmittingAccount | null {
  const row = db.statement('SELECT balance, active_tasks, status FROM accounts WHERE id = ?').get(accountId) as
    | { balance: number; active_tasks: number; status: AccountStatus }
    | undefined;
  return row ? { balance: row.balance, activeTasks: row.active_tasks, status: row.status } : null;
}

/** A budgeted key's spend in a period (its key_spend row; 0 before its first create of the period). */
export function keySpentInPeriodIn(db: SqliteDatabase, period: { keyId: string; start: Date }): number {
  const row = db
    .statement('SELECT spent FROM key_spend WHERE key_id = ? AND period_start = ?')
    .get(period.keyId, period.start.getTime()) as { spent: number } | undefined;
  return row?.spent ?? 0;
}

/** Adds `amount` to a budgeted key's spend in a period: a create's charge, or (negative) a refund. */
export function addKeySpendIn(db: SqliteDatabase, period: { keyId: string; start: Date }, amount: number): void {
  db.statement(
    `INSERT INTO key_spend (key_id, period_start, spent) VALUES (?, ?, ?)
     ON CONFLICT (key_id, period_start) DO UPDATE SET spent = spent + excluded.spent`,
  ).run(period.keyId, period.start.getTime(), amount);
}

/** Writes an admission's charge (core admitTasks): the balance and active count it decided, a debit row per task. */
export function chargeAdmissionIn(db: SqliteDatabase, accountId: string, admission: Admission): void {
  db.statement('UPDATE accounts SET balance = ?, active_tasks = active_tasks + ? WHERE id = ?').run(
    admission.balanceAfter,
    admission.activeTasksDelta,
    accountId,
  );
  for (const debit of admission.debits) insertLedgerRow(db, accountId, { kind: 'debit', ...debit, note: null });
}

/** One active task more (created) or fewer (finished); floored at 0 so that no drift could stop a task finishing. */
export function countActiveTask(db: SqliteDatabase, accountId: string, delta: number): void {
  db.statement('UPDATE accounts SET active_tasks = max(active_tasks + ?, 0) WHERE id = ?').run(delta, accountId);
}

/** Gives a task's cost back in the caller's transaction, unless it was already refunded (core refundOf). */
export function refundTaskIn(db: SqliteDatabase, taskId: string, now: Date): boolean {
  const task = db
    .statement(
      `SELECT t.account_id, t.cost, t.key_id, t.created_at, k.budget_tokens, k.budget_period
       FROM tasks AS t LEFT JOIN api_keys AS k ON k.id = t.key_id WHERE t.id = ${textParameter('?')}`,
    )
    .get(taskId) as
    | {
        account_id: string;
        cost: number;
        key_id: string | null;
        created_at: number;
        budget_tokens: number | null;
        budget_period: BudgetPeriod | null;
      }
    | undefined;
  const refunded = db.statement("SELECT 1 FROM ledger WHERE task_id = ? AND kind = 'refund'").get(taskId) !== undefined;
  const refund = refundOf(task ? { accountId: task.account_id, cost: task.cost } : null, refunded);
  if (refund === null || !addLedgerEntry(db, refund.accountId, 'refund', refund.amount, taskId, null, now))
    return false;
  // A refund gives the key's budget back: the spend of the period the task was created in.
  if (task?.key_id && task.budget_tokens !== null)
    addKeySpendIn(
      db,
      { keyId: task.key_id, start: budgetPeriodStart(task.budget_period, new Date(task.created_at)) },
      -refund.amount,
    );
  return true;
}
