import t from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';

t.test('the migration numbers existing ledger entries per account, in their order, and new ones follow', async (t) => {
  const path = `${t.testdir({})}/imagegen.sqlite`;
  // The schema before migration 7, which numbers each account's entries.
  const old = openAtSchemaVersion(path, 6);
  const account = old.prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, 0)');
  account.run('a', 'a', 3);
  account.run('b', 'b', 2);
  const entry = old.prepare(
    "INSERT INTO ledger (account_id, kind, amount, balance_after, created_at) VALUES (?, 'grant', 1, ?, 0)",
  );
  // Global ids 1..5, interleaved: a gets 1, 3, 5 and b gets 2, 4.
  entry.run('a', 1);
  entry.run('b', 1);
  entry.run('a', 2);
  entry.run('b', 2);
  entry.run('a', 3);
  old.close();

  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  await store.accounts.grantTokens({ accountId: 'b', amount: 5, note: null, now: new Date() });
  // Entries are found by their content (ids became UUIDs in a later migration): each account's in
  // their order, paged by the per-account numbers.
  const balances = async (accountId: string) =>
    (await store.accounts.listLedger(accountId, { limit: 10 })).items.map((e) => e.balanceAfter);
  t.same(await balances('a'), [3, 2, 1]);
  t.same(await balances('b'), [7, 2, 1]);
  const firstPage = await store.accounts.listLedger('b', { limit: 1 });
  const rest = await store.accounts.listLedger('b', { limit: 10, cursor: firstPage.nextCursor! });
  t.same(
    rest.items.map((e) => e.balanceAfter),
    [2, 1],
  );
});
