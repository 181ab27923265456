import type { Test } from 'tap';
import type { LedgerEntry, Store } from '../../src/store/port.js';

/**
 * docs/design.md §3.8: grants − debits + refunds = balance, always; and the ledger is a consistent chain,
 * each entry's balance_after being the previous one moved by its amount. Call it after every test
 * that moves money.
 */
export async function assertLedgerInvariant(t: Test, store: Store, accountId: string): Promise<void> {
  const account = await store.accounts.getAccount(accountId);
  if (!account) {
    t.fail(`account ${accountId} exists`);
    return;
  }
  const totals = await store.accounts.ledgerTotals(accountId);
  t.equal(
    totals.grant - totals.debit + totals.refund,
    account.balance,
    `ledger invariant: ${totals.grant} − ${totals.debit} + ${totals.refund} = balance ${account.balance}`,
  );
  t.ok(account.balance >= 0, 'balance is never negative');

  const entries: LedgerEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.accounts.listLedger(accountId, { limit: 100, cursor });
    entries.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  entries.reverse();
  let running = 0;
  const breaks: string[] = [];
  for (const entry of entries) {
    running += entry.kind === 'debit' ? -entry.amount : entry.amount;
    if (entry.balanceAfter !== running)
      breaks.push(
        `entry ${entry.id} (${entry.kind} ${entry.amount}) says ${entry.balanceAfter}, chain says ${running}`,
      );
  }
  t.same(breaks, [], 'every balance_after follows from the entries before it');
  t.equal(running, account.balance, 'the ledger chain ends at the balance');

  const perTask = new Map<string, { debit: number; refund: number }>();
  for (const entry of entries) {
    if (!entry.taskId || entry.kind === 'grant') continue;
    const seen = perTask.get(entry.taskId) ?? { debit: 0, refund: 0 };
    seen[entry.kind]++;
    perTask.set(entry.taskId, seen);
  }
  const bad = [...perTask].filter(([, n]) => n.debit !== 1 || n.refund > 1).map(([id]) => id);
  t.same(bad, [], 'every task is debited once and refunded at most once');
}
