import { balanceChange, ledgerTotals } from '../../core/ledger.js';
import { notFound } from '../../core/errors.js';
import { ACTIVE_STATUSES, activeTasksCountLimit } from '../../core/task-execution.js';
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
  TaskCreationLimits,
} from '../port.js';
import { prepared, type PostgresDatabase, type Tx } from './postgres-database.js';
import {
  ACCOUNT_COLUMNS,
  API_KEY_COLUMNS,
  toAccount,
  toApiKey,
  toLedgerEntry,
  type AccountRow,
  type ApiKeyRow,
  type LedgerRow,
} from './rows.js';
import {
  budgetPeriodOf,
  budgetPeriodStart,
  UNSCOPED,
  type AccountStatus,
  type BudgetPeriod,
  type KeyScope,
} from '../../core/key-scope.js';
import type { TaskRecord } from '../../core/task.js';
import { adjustmentBelowZero, adjustmentOf, replayedAdjustment } from '../../core/ledger.js';
import { decodeCursor } from '../cursor.js';
import { uuidv7Floor } from '../../ids.js';

/** Accounts, their ledger and their API keys on PostgreSQL. */
export class PostgresAccounts implements AccountStore, ApiKeyStore {
  constructor(private readonly db: PostgresDatabase) {}

  async createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account> {
    return this.db.transaction(async (tx) => {
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
    const { rows } = await this.db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [
      accountId,
    ]);
    return rows[0] ? toAccount(rows[0]) : null;
  }

  async countAccounts(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>('SELECT count(*) AS n FROM accounts');
    return rows[0].n;
  }

  async grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account> {
    return this.db.transaction(async (tx) => {
      if (!(await addLedgerEntry(tx, input.accountId, 'grant', input.amount, null, input.note, input.now))) {
        throw notFound('Account');
      }
      return requireAccount(tx, input.accountId);
    });
  }

  async listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    const before = query.cursor ? decodeSequenceCursor(query.cursor) : Number.MAX_SAFE_INTEGER;
    const { rows } = await this.db.query<LedgerRow>(
      'SELECT * FROM ledger WHERE account_id = $1 AND account_seq < $2 ORDER BY account_seq DESC LIMIT $3',
      [accountId, before, pageFetchSize(query.limit)],
    );
    const page = pageOf(rows, query.limit, (r) => String(r.account_seq));
    return { items: page.items.map(toLedgerEntry), nextCursor: page.nextCursor };
  }

  async ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>> {
    const { rows } = await this.db.query<{ kind: LedgerKind; total: number }>(
      'SELECT kind, sum(amount)::bigint AS total FROM ledger WHERE account_id = $1 GROUP BY kind',
      [accountId],
    );
    return ledgerTotals(rows);
  }

  async listAccounts(query: AccountListQuery): Promise<Page<Account>> {
    const conditions = ['id < $1'];
    const params: unknown[] = [query.cursor ? decodeCursor(query.cursor) : 'g'];
    if (query.status) {
      params.push(query.status);
      conditions.push(`status = $${params.length}`);
    }
    if (query.q) {
      params.push(`%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      conditions.push(`name ILIKE $${params.length}`);
    }
    params.push(pageFetchSize(query.limit));
    const { rows } = await this.db.query<AccountRow>(
      `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT $${params.length}`,
      params,
    );
    return pageOf(rows.map(toAccount), query.limit, (a) => a.id);
  }

  async updateAccount(accountId: string, change: { name?: string; status?: AccountStatus }): Promise<Account | null> {
    const { rows } = await this.db.query<AccountRow>(
      `UPDATE accounts SET name = coalesce($2, name), status = coalesce($3, status) WHERE id = $1
       RETURNING ${ACCOUNT_COLUMNS}`,
      [accountId, change.name ?? null, change.status ?? null],
    );
    return rows[0] ? toAccount(rows[0]) : null;
  }

  async adjustBalance(input: BalanceAdjustment): Promise<{ entry: LedgerEntry; account: Account; replayed: boolean }> {
    return this.db.transaction(async (tx) => {
      // The account's lock orders grants under one key: the second sees the first's entry.
      const locked = await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [input.accountId]);
      if (locked.rowCount === 0) throw notFound('Account');
      const earlier = await tx.query<LedgerRow>('SELECT * FROM ledger WHERE account_id = $1 AND idempotency_key = $2', [
        input.accountId,
        input.idempotencyKey,
      ]);
      if (earlier.rows[0]) {
        const entry = toLedgerEntry(earlier.rows[0]);
        replayedAdjustment(entry, input);
        return { entry, account: await requireAccount(tx, input.accountId), replayed: true };
      }
      const { kind, amount } = adjustmentOf(input.amount);
      if (!(await addLedgerEntry(tx, input.accountId, kind, amount, null, input.note, input.now)))
        throw adjustmentBelowZero();
      const { rows } = await tx.query<LedgerRow>(
        `UPDATE ledger SET reference = $2, idempotency_key = $3
         WHERE id = (SELECT id FROM ledger WHERE account_id = $1 ORDER BY account_seq DESC LIMIT 1) RETURNING *`,
        [input.accountId, input.reference, input.idempotencyKey],
      );
      return { entry: toLedgerEntry(rows[0]), account: await requireAccount(tx, input.accountId), replayed: false };
    });
  }

  async getApiKey(keyId: string): Promise<ApiKeyRecord | null> {
    const { rows } = await this.db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE id = $1`, [keyId]);
    return rows[0] ? toApiKey(rows[0]) : null;
  }

  async keySpentSince(keyId: string, since: Date): Promise<number> {
    // The key's tasks in its account's range of tasks_account_usage, which includes the key, status
    // and cost (the key list's figure; a create reads its key's key_spend row instead).
    const { rows } = await this.db.query<{ spent: number }>(
      `SELECT coalesce(sum(t.cost), 0)::bigint AS spent FROM api_keys AS k JOIN tasks AS t
         ON t.account_id = k.account_id AND t.id >= $2 AND t.key_id = k.id AND t.status NOT IN ('FAILED', 'CANCELED')
       WHERE k.id = $1`,
      [keyId, uuidv7Floor(since)],
    );
    return rows[0].spent;
  }

  async insertApiKey(input: ApiKeyInsert): Promise<ApiKeyRecord> {
    const { rows } = await this.db.query<ApiKeyRow>(
      `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, models, budget_tokens, budget_period,
         creates_per_min, requests_per_min, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
       RETURNING ${API_KEY_COLUMNS}`,
      [
        input.id,
        input.accountId,
        input.name,
        input.prefix,
        input.hash,
        input.now,
        ...scopeValues(input.scope ?? UNSCOPED),
      ],
    );
    return toApiKey(rows[0]);
  }

  async findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null> {
    const { rows } = await this.db.query<
      ApiKeyRow & {
        account_name: string;
        account_balance: number;
        account_status: AccountStatus;
        account_created_at: Date;
      }
    >(
      `SELECT ${API_KEY_COLUMNS.split(', ')
        .map((column) => `k.${column}`)
        .join(', ')},
              a.name AS account_name, a.balance AS account_balance, a.status AS account_status,
              a.created_at AS account_created_at
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
        status: row.account_status,
        created_at: row.account_created_at,
      }),
    };
  }

  async listApiKeys(accountId?: string): Promise<ApiKeyRecord[]> {
    const columns = API_KEY_COLUMNS;
    const { rows } = accountId
      ? await this.db.query<ApiKeyRow>(
          `SELECT ${columns} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`,
          [accountId],
        )
      : await this.db.query<ApiKeyRow>(`SELECT ${columns} FROM api_keys ORDER BY created_at, id`);
    return rows.map(toApiKey);
  }

  async revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = await this.db.query(
      'UPDATE api_keys SET revoked_at = $1 WHERE (id = $2 OR prefix = $2) AND revoked_at IS NULL',
      [now, idOrPrefix],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async markApiKeyUsed(keyId: string, now: Date): Promise<void> {
    await this.db.query('UPDATE api_keys SET last_used_at = $1 WHERE id = $2', [now, keyId]);
  }
}

async function requireAccount(tx: Tx, accountId: string): Promise<Account> {
  const { rows } = await tx.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [accountId]);
  return toAccount(rows[0]);
}

/**
 * Moves the balance and records why, in the caller's transaction. The conditional update takes
 * the account's row lock, so the ledger positions (account_seq) of one account follow the order of its balances.
 * False when the account is missing or a debit would go negative.
 */
export async function addLedgerEntry(
  tx: Tx,
  accountId: string,
  kind: LedgerKind,
  amount: number,
  taskId: string | null,
  note: string | null,
  now: Date,
): Promise<boolean> {
  const delta = balanceChange(kind, amount);
  const { rows } = await tx.query<{ balance: number }>(
    'UPDATE accounts SET balance = balance + $1 WHERE id = $2 AND balance + $1 >= 0 RETURNING balance',
    [delta, accountId],
  );
  if (!rows[0]) return false;
  await insertLedgerRows(tx, accountId, [{ kind, amount, balanceAfter: rows[0].balance, taskId, note, at: now }]);
  return true;
}

/**
 * Ledger rows of one account, next in its own sequence, in one statement; the caller holds the
 * account's row lock, so the positions (account_seq) follow the order of its balances.
 */
async function insertLedgerRows(tx: Tx, accountId: string, entries: NewLedgerEntry[]): Promise<void> {
  await tx.query(ledgerRowsInsert('$1', 2), [accountId, ...ledgerRowsValues(entries)]);
}

/**
 * The INSERT of ledger rows of one account, next in its own sequence: `account` is the account
 * id's placeholder, and the entries' seven arrays (ledgerRowsValues) are bound from $`from` on.
 */
export function ledgerRowsInsert(account: string, from: number): string {
  const entry = (i: number) => `$${from + i}`;
  return `INSERT INTO ledger (account_id, account_seq, entry_id, kind, amount, balance_after, task_id, note, created_at)
     SELECT ${account}, (SELECT coalesce(max(account_seq), 0) FROM ledger WHERE account_id = ${account}) + e.n, e.entry_id,
       e.kind, e.amount, e.balance_after, e.task_id, e.note, e.created_at
     FROM unnest(${entry(0)}::text[], ${entry(1)}::text[], ${entry(2)}::bigint[], ${entry(3)}::bigint[], ${entry(4)}::text[],
       ${entry(5)}::text[], ${entry(6)}::timestamptz[])
       WITH ORDINALITY AS e(entry_id, kind, amount, balance_after, task_id, note, created_at, n)`;
}

/** ledgerRowsInsert's seven arrays, column by column. */
export function ledgerRowsValues(entries: readonly NewLedgerEntry[]): unknown[] {
  return [
    entries.map((e) => newIdAt(e.at)),
    entries.map((e) => e.kind),
    entries.map((e) => e.amount),
    entries.map((e) => e.balanceAfter),
    entries.map((e) => e.taskId),
    entries.map((e) => e.note),
    entries.map((e) => e.at),
  ];
}

/** Gives a task's cost back in the caller's transaction, unless it was already refunded (core refundOf). */
export async function refundTaskIn(tx: Tx, taskId: string, now: Date): Promise<boolean> {
  // The task's row lock makes concurrent refunds of one task take turns; the second sees the first's
  // entry, read after the lock in a statement of its own (a statement sees what committed before it began).
  const { rows } = await tx.query<{
    account_id: string;
    cost: number;
    key_id: string | null;
    created_at: Date;
    budget_tokens: number | null;
    budget_period: BudgetPeriod | null;
  }>(
    `SELECT t.account_id, t.cost, t.key_id, t.created_at, k.budget_tokens, k.budget_period
     FROM tasks AS t LEFT JOIN api_keys AS k ON k.id = t.key_id WHERE t.id = $1 FOR UPDATE OF t`,
    [taskId],
  );
  const task = rows[0];
  const refunded = task
    ? ((await tx.query("SELECT 1 FROM ledger WHERE task_id = $1 AND kind = 'refund'", [taskId])).rowCount ?? 0) > 0
    : false;
  const refund = refundOf(task ? { accountId: task.account_id, cost: task.cost } : null, refunded);
  if (refund === null || !(await addLedgerEntry(tx, refund.accountId, 'refund', refund.amount, taskId, null, now)))
    return false;
  // A refund gives the key's budget back: the spend of the period the task was created in.
  if (task.key_id !== null && task.budget_tokens !== null)
    await tx.query('UPDATE key_spend SET spent = spent - $3 WHERE key_id = $1 AND period_start = $2', [
      task.key_id,
      budgetPeriodStart(task.budget_period, task.created_at),
      refund.amount,
    ]);
  return true;
}

/**
 * The account as an admission reads it (core admitTasks): its row locked, then its active tasks
 * counted after the lock was granted, so that the count sees every admission that held the lock
 * before. Both in one round trip: the migration's `admitting_account`, whose two statements each
 * take their own snapshot. The lock orders the account's concurrent creates, so that each sees the
 * last one's balance and tasks; finishes take no lock of the account (a finish only lowers the
 * count). null for a missing account.
 */
export async function lockAdmittingAccountIn(
  tx: Tx,
  accountId: string,
  limits: TaskCreationLimits,
  at: Date,
): Promise<{ account: AdmittingAccount; keySpent: number } | null> {
  // Named, so that PostgreSQL parses and plans it once per connection (decision 0030, "Later").
  // The count reads one index range per active status (tasks_account_status), only up to the limit.
  // The key's spend in the period (its key_spend row) is read only for a key with a budget (p_key null: none).
  const period = budgetPeriodOf(limits.key, at);
  const { rows } = await tx.query<{ balance: number; active: number; status: AccountStatus; spent: number }>(
    prepared(
      'admitting-account-3',
      'SELECT balance, active, status, spent FROM admitting_account($1, $2, $3, $4, $5)',
      [
        accountId,
        ACTIVE_STATUSES,
        activeTasksCountLimit(limits.maxActiveTasks),
        period?.keyId ?? null,
        period?.start ?? null,
      ],
    ),
  );
  if (!rows[0]) return null;
  return {
    account: { balance: rows[0].balance, activeTasks: rows[0].active, status: rows[0].status },
    keySpent: rows[0].spent,
  };
}

/**
 * The key's spend an admission adds (admissionWrite's last three values): the key's id (null for a
 * key without a budget: nothing is added), the period's start, the tasks' cost.
 */
export function keySpendValues(limits: TaskCreationLimits, tasks: readonly TaskRecord[]): unknown[] {
  const period = budgetPeriodOf(limits.key, tasks[0].createdAt);
  return [period?.keyId ?? null, period?.start ?? null, tasks.reduce((sum, task) => sum + task.cost, 0)];
}

/** An admission's debit rows (core admitTasks), as the ledger writes them. */
export function admissionDebits(admission: Admission): NewLedgerEntry[] {
  return admission.debits.map((debit) => ({ kind: 'debit', ...debit, note: null }));
}

/** The values of a key's scope columns, in the order insertApiKey binds them. */
function scopeValues(scope: KeyScope): unknown[] {
  return [
    scope.models,
    scope.tokenBudget?.tokens ?? null,
    scope.tokenBudget?.period ?? null,
    scope.rateLimits.createsPerMin,
    scope.rateLimits.requestsPerMin,
    scope.expiresAt,
  ];
}
