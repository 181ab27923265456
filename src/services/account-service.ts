import type { Account, LedgerEntry, Page, Store } from '../store/port.js';

/** The limits that apply to a caller, as GET /account reports them. */
export interface AccountLimits {
  createsPerMin: number;
  requestsPerMin: number;
  maxActiveTasks: number;
}

export interface AccountServiceOptions {
  store: Pick<Store, 'accounts'>;
  limits: AccountLimits;
}

/** An account's balance, limits and ledger: the reads a client (or a tool) makes of its account. */
export class AccountService {
  constructor(private readonly options: AccountServiceOptions) {}

  /**
   * The account of a key that authenticated a moment ago, with the limits that apply to it. Accounts
   * are never deleted, so a missing one is a fault, not a 404.
   */
  async overview(accountId: string): Promise<{ account: Account; limits: AccountLimits }> {
    const account = await this.options.store.accounts.getAccount(accountId);
    if (!account) throw new Error(`account ${accountId} of an authenticated key is missing`);
    return { account, limits: this.options.limits };
  }

  /** The account's balance in tokens. */
  async balance(accountId: string): Promise<number> {
    return (await this.overview(accountId)).account.balance;
  }

  /** Grants, debits and refunds, newest first, a page at a time. */
  ledger(accountId: string, page: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>> {
    return this.options.store.accounts.listLedger(accountId, page);
  }
}
