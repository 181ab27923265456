import type { AccountLimits } from '../services/account-service.js';
import type { Account, LedgerEntry } from '../store/port.js';

/** GET /account's `data`: the balance, the calling key and the limits that apply to it. */
export function toAccountResource(
  account: Account,
  key: { keyId: string; keyName: string; keyPrefix: string },
  limits: AccountLimits,
) {
  return {
    account_id: account.id,
    balance: account.balance,
    key: { key_id: key.keyId, name: key.keyName, prefix: key.keyPrefix },
    limits: {
      creates_per_min: limits.createsPerMin,
      requests_per_min: limits.requestsPerMin,
      max_active_tasks: limits.maxActiveTasks,
    },
  };
}

export const toLedgerEntryResource = (e: LedgerEntry) => ({
  id: e.id,
  kind: e.kind,
  amount: e.amount,
  balance_after: e.balanceAfter,
  task_id: e.taskId,
  note: e.note,
  created_at: e.createdAt.toISOString(),
});
