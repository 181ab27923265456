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
