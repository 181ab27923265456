import type { AdminAuditEntry } from '../core/admin.js';
import type { Account, ApiKeyRecord, LedgerEntry } from '../store/port.js';

/** Admin and self-service resources (schemas/admin.ts) from the store's records. */

export const toAdminAccountResource = (a: Account) => ({
  account_id: a.id,
  name: a.name,
  status: a.status,
  balance: a.balance,
  created_at: a.createdAt.toISOString(),
});

const isoOrNull = (d: Date | null) => (d === null ? null : d.toISOString());

export const toApiKeyResource = (k: ApiKeyRecord, budgetSpent: number) => ({
  key_id: k.id,
  account_id: k.accountId,
  name: k.name,
  prefix: k.prefix,
  models: k.scope.models === null ? null : [...k.scope.models],
  token_budget: k.scope.tokenBudget,
  budget_spent: budgetSpent,
  rate_limits: {
    creates_per_min: k.scope.rateLimits.createsPerMin,
    requests_per_min: k.scope.rateLimits.requestsPerMin,
  },
  expires_at: isoOrNull(k.scope.expiresAt),
  created_at: k.createdAt.toISOString(),
  last_used_at: isoOrNull(k.lastUsedAt),
  revoked_at: isoOrNull(k.revokedAt),
});

export const toGrantResource = (entry: LedgerEntry, account: Account) => ({
  entry_id: entry.id,
  kind: entry.kind as 'grant' | 'debit',
  amount: entry.amount,
  balance_after: entry.balanceAfter,
  note: entry.note,
  reference: entry.reference,
  created_at: entry.createdAt.toISOString(),
  account: toAdminAccountResource(account),
});

export const toAuditEntryResource = (e: AdminAuditEntry) => ({
  id: e.id,
  admin_key_id: e.adminKeyId,
  action: e.action,
  target: e.target,
  status: e.statusCode,
  request_id: e.requestId,
  client_address: e.clientAddress,
  created_at: e.createdAt.toISOString(),
});
