import { DomainError } from './errors.js';

/** Why an account's balance moved: tokens granted, a task's cost taken, a task's cost given back. */
export type LedgerKind = 'grant' | 'debit' | 'refund';

/** The balance change of a ledger entry of `amount` tokens: a debit takes, the others give. */
export function balanceChange(kind: LedgerKind, amount: number): number {
  return kind === 'debit' ? -amount : amount;
}

/** Sums of the ledger by kind, every kind present (0 when it has no entry). */
export function ledgerTotals(sums: readonly { kind: LedgerKind; total: number }[]): Record<LedgerKind, number> {
  const totals: Record<LedgerKind, number> = { grant: 0, debit: 0, refund: 0 };
  for (const { kind, total } of sums) totals[kind] += Number(total);
  return totals;
}

/**
 * An operator's grant (tokens > 0) or adjustment (tokens < 0) as a ledger entry: an adjustment is a
 * debit without a task, so that grants − debits + refunds = balance still holds.
 */
export function adjustmentOf(tokens: number): { kind: LedgerKind; amount: number } {
  if (!Number.isSafeInteger(tokens) || tokens === 0) throw new RangeError('an adjustment is a non-zero integer');
  return tokens > 0 ? { kind: 'grant', amount: tokens } : { kind: 'debit', amount: -tokens };
}

/**
 * A grant retried under the Idempotency-Key of an earlier one: applied once, so the earlier entry
 * answers; the same key with other tokens is refused (422), as every Idempotency-Key is.
 */
export function replayedAdjustment(earlier: { kind: LedgerKind; amount: number }, retried: { amount: number }): void {
  if (balanceChange(earlier.kind, earlier.amount) === retried.amount) return;
  throw new DomainError(
    'idempotency_key_reused',
    'This Idempotency-Key was used for another grant or adjustment of this account.',
  );
}

export const adjustmentBelowZero = () => {
  const detail = 'This adjustment would take the balance below zero.';
  return new DomainError('invalid_state', detail, [
    { pointer: '/tokens', location: 'body', code: 'below_zero', detail },
  ]);
};
