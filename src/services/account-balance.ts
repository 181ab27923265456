import type { Store } from '../store/port.js';

/**
 * The balance of an account, read through a service so that callers outside the REST routes (the
 * MCP tools) never reach into the store themselves.
 */
export class AccountBalance {
  constructor(private readonly store: Pick<Store, 'accounts'>) {}

  async of(accountId: string): Promise<{ accountId: string; balance: number }> {
    const account = await this.store.accounts.getAccount(accountId);
    // Callers hold a key that was found joined to this account, and accounts are never deleted.
    if (!account) throw new Error(`account ${accountId} is missing`);
    return { accountId: account.id, balance: account.balance };
  }
}
