import {
  USAGE_GROUPS,
  usageGroups,
  usageRange,
  type AdminAuditEntry,
  type UsageGroup,
  type UsageRow,
} from '../core/admin.js';
import { notFound } from '../core/errors.js';
import { budgetPeriodStart, type AccountStatus, type KeyScope } from '../core/key-scope.js';
import { newIdAt } from '../ids.js';
import type { Account, ApiKeyRecord, LedgerEntry, Page, Store } from '../store/port.js';
import { issueApiKey, type IssuedKey } from './api-keys.js';

/** The groups of the self-service report: an account sees only itself. */
export const OWN_USAGE_GROUPS: readonly UsageGroup[] = ['day', 'model', 'key'];

export interface UsageRequest {
  from: string;
  to: string;
  groupBy?: string;
  accountId?: string;
}

/**
 * The use cases of operating the business (docs/design.md §3.9), one per action; the admin routes
 * and the self-service ones (an account's own keys and usage) call them.
 */
export class AdminService {
  constructor(
    private readonly store: Pick<Store, 'accounts' | 'usage' | 'admin'>,
    private readonly now: () => Date,
    /** Told of a revoked key or a suspended account, so that cached authentications end at once. */
    private readonly onAccessChanged: (match: { accountId?: string; keyId?: string }) => void = () => {},
  ) {}

  createAccount(name: string, tokens: number): Promise<Account> {
    const now = this.now();
    return this.store.accounts.createAccount({ id: newIdAt(now), name, initialTokens: tokens, now });
  }

  listAccounts(query: { limit: number; cursor?: string; status?: AccountStatus; q?: string }): Promise<Page<Account>> {
    return this.store.accounts.listAccounts(query);
  }

  async account(accountId: string): Promise<Account> {
    const account = await this.store.accounts.getAccount(accountId);
    if (!account) throw notFound('Account');
    return account;
  }

  async updateAccount(accountId: string, change: { name?: string; status?: AccountStatus }): Promise<Account> {
    const account = await this.store.accounts.updateAccount(accountId, change);
    if (!account) throw notFound('Account');
    this.onAccessChanged({ accountId });
    return account;
  }

  async createKey(accountId: string, name: string, scope: KeyScope): Promise<IssuedKey> {
    await this.account(accountId);
    return issueApiKey(this.store, accountId, name, this.now(), scope);
  }

  /** The account's keys, each with what it spent in its current budget period. */
  async keys(accountId: string): Promise<{ key: ApiKeyRecord; spent: number }[]> {
    await this.account(accountId);
    const now = this.now();
    const keys = await this.store.accounts.listApiKeys(accountId);
    return Promise.all(
      keys.map(async (key) => ({
        key,
        spent: await this.store.accounts.keySpentSince(
          key.id,
          budgetPeriodStart(key.scope.tokenBudget?.period ?? null, now),
        ),
      })),
    );
  }

  async revokeKey(keyId: string): Promise<void> {
    const key = await this.store.accounts.getApiKey(keyId);
    if (!key || !(await this.store.accounts.revokeApiKey(key.id, this.now()))) throw notFound('Key');
    this.onAccessChanged({ keyId: key.id });
  }

  grant(
    accountId: string,
    input: { tokens: number; note: string; reference: string | null; idempotencyKey: string },
  ): Promise<{ entry: LedgerEntry; account: Account; replayed: boolean }> {
    return this.store.accounts.adjustBalance({
      accountId,
      amount: input.tokens,
      note: input.note,
      reference: input.reference,
      idempotencyKey: input.idempotencyKey,
      now: this.now(),
    });
  }

  async ledger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    await this.account(accountId);
    return this.store.accounts.listLedger(accountId, query);
  }

  /** A usage report; `allowed` are the groups this caller may ask for. */
  async usage(
    request: UsageRequest,
    allowed: readonly UsageGroup[] = USAGE_GROUPS,
  ): Promise<{ rows: UsageRow[]; groups: UsageGroup[] }> {
    const groups = usageGroups(request.groupBy, allowed);
    const range = usageRange(request.from, request.to);
    const rows = await this.store.usage.usage({
      ...range,
      groupBy: groups,
      ...(request.accountId === undefined ? {} : { accountId: request.accountId }),
    });
    return { rows, groups };
  }

  appendAudit(entry: AdminAuditEntry): Promise<void> {
    return this.store.admin.appendAudit(entry);
  }

  audit(query: { limit: number; cursor?: string }) {
    return this.store.admin.listAudit(query);
  }
}
