import type { TaskRecord, TaskStatus } from '../core/task.js';

/**
 * The persistence port. Every method is async so that the PostgreSQL adapter can implement it
 * without changing callers; every multi-row change is one transaction inside the adapter.
 */

export interface Account {
  id: string;
  name: string;
  balance: number;
  createdAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  name: string;
  /** The first characters of the key, safe to show; identifies it in listings. */
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export type LedgerKind = 'grant' | 'debit' | 'refund';

export interface LedgerEntry {
  id: string;
  accountId: string;
  kind: LedgerKind;
  /** Always positive; the kind says which way it moved the balance. */
  amount: number;
  balanceAfter: number;
  taskId: string | null;
  note: string | null;
  createdAt: Date;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface TaskListQuery {
  limit: number;
  /** Opaque to callers: the adapter's own keyset position. */
  cursor?: string;
  status?: TaskStatus;
  model?: string;
  createdAfter?: Date;
  createdBefore?: Date;
}

export interface AccountStore {
  /** Creates the account and, when initialTokens > 0, its opening grant. */
  createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account>;
  getAccount(accountId: string): Promise<Account | null>;
  countAccounts(): Promise<number>;
  grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account>;
  listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>>;
  /** Sums of the ledger by kind, for the invariant grants − debits + refunds = balance. */
  ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>>;
}

export interface ApiKeyStore {
  insertApiKey(input: { id: string; accountId: string; name: string; prefix: string; hash: string; now: Date }): Promise<ApiKeyRecord>;
  /** The unrevoked key with this hash and its account, or null. */
  findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null>;
  listApiKeys(accountId?: string): Promise<ApiKeyRecord[]>;
  /** Revokes by key id or prefix; false when nothing matched. */
  revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean>;
  markApiKeyUsed(keyId: string, now: Date): Promise<void>;
}

export interface TaskCreationLimits {
  /** CREATED + IN_PROGRESS tasks an account may have, counting the new one. */
  maxActiveTasks: number;
}

export interface TaskStore {
  /**
   * Inserts the task and debits its cost in one transaction. Throws DomainError
   * `insufficient_tokens` or `too_many_active_tasks` and changes nothing when a limit is hit.
   */
  insertTaskWithDebit(task: TaskRecord, limits: TaskCreationLimits): Promise<void>;
  getTask(accountId: string, taskId: string): Promise<TaskRecord | null>;
  listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>>;
  /**
   * Gives the task's cost back, at most once per task whatever the number of callers.
   * Returns whether this call made the refund.
   */
  refundTask(taskId: string, now: Date): Promise<boolean>;
}

export interface MediaStore {
  /** The subset of ids that name unexpired uploads owned by the account. */
  findUsableUploads(accountId: string, mediaIds: string[], now: Date): Promise<Set<string>>;
}

export interface Store extends AccountStore, ApiKeyStore, TaskStore, MediaStore {
  readonly kind: 'sqlite' | 'postgres';
  /** Brings the schema to the latest version; safe to call on every start. */
  migrate(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
