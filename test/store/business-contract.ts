import type { Test } from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { UNSCOPED } from '../../src/core/key-scope.js';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import type { Store } from '../../src/store/port.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import type { StoreAdapterUnderTest } from '../helpers/store.js';

/**
 * The store's part in operating the business (docs/design.md §3.9), part of the Store port's
 * contract (store-contract.ts runs it on every adapter): key budgets exact under concurrent
 * creates, a key's spend with and without a budget, grants applied once per Idempotency-Key, usage
 * from the tasks, and an audit log that cannot be changed.
 */
const codeOf = (reason: unknown) => (reason instanceof DomainError ? reason.code : String(reason));

async function accountWithKey(store: Store, tokens: number, budget: number) {
  const now = new Date();
  const account = await store.accounts.createAccount({ id: newIdAt(now), name: 'biz', initialTokens: tokens, now });
  const scope = { ...UNSCOPED, tokenBudget: { tokens: budget, period: 'day' as const } };
  const key = await store.accounts.insertApiKey({
    id: newIdAt(now),
    accountId: account.id,
    name: 'scoped',
    prefix: `igk_${newIdAt(now).slice(-8)}`,
    hash: newIdAt(now),
    now,
    scope,
  });
  return { accountId: account.id, key: { id: key.id, scope: key.scope } };
}

const task = (accountId: string, keyId: string, model = 'alpha-pro') => {
  const now = new Date();
  return createTask({ model, prompt: 'a lighthouse' } as never, { accountId, now, newId: () => newIdAt(now), keyId });
};

export function businessContract(t: Test, adapter: StoreAdapterUnderTest): void {
  const open = async (t: Test) => (await adapter.open(t)).store;

  t.test('50 concurrent creates against a key budget for 5 admit exactly 5; a refund gives one back', async (t) => {
    const store = await open(t);
    const { accountId, key } = await accountWithKey(store, 100_000, 5 * 25);
    t.same(key.scope.tokenBudget, { tokens: 125, period: 'day' }, 'the scope round-trips');
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, () =>
        store.tasks.insertTaskWithDebit(task(accountId, key.id), { maxActiveTasks: 1000, key }),
      ),
    );
    t.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 5);
    t.same(
      [...new Set(outcomes.flatMap((o) => (o.status === 'rejected' ? [codeOf(o.reason)] : [])))],
      ['key_budget_exhausted'],
    );
    t.equal(await store.accounts.keySpentSince(key.id, new Date(Date.now() - 3_600_000)), 125);
    const page = await store.tasks.listTasks(accountId, { limit: 10 });
    await store.tasks.cancelTask(accountId, page.items[0].id, new Date());
    t.equal(await store.accounts.keySpentSince(key.id, new Date(Date.now() - 3_600_000)), 100, 'refunded');
    await store.tasks.insertTaskWithDebit(task(accountId, key.id), { maxActiveTasks: 1000, key });
    await assertLedgerInvariant(t, store, accountId);
  });

  t.test('grants under one Idempotency-Key are applied once, however many at once', async (t) => {
    const store = await open(t);
    const { accountId } = await accountWithKey(store, 10, 1);
    const grant = (amount: number) =>
      store.accounts.adjustBalance({
        accountId,
        amount,
        note: 'invoice',
        reference: 'INV-1',
        idempotencyKey: 'inv-1',
        now: new Date(),
      });
    const results = await Promise.all(Array.from({ length: 10 }, () => grant(40)));
    t.equal(new Set(results.map((r) => r.entry.id)).size, 1, 'one entry');
    t.equal(results.filter((r) => !r.replayed).length, 1, 'applied once');
    t.equal((await store.accounts.getAccount(accountId))?.balance, 50);
    t.match(results[0].entry, { kind: 'grant', amount: 40, reference: 'INV-1' });
    t.equal(await grant(41).catch(codeOf), 'idempotency_key_reused');
    const below = store.accounts.adjustBalance({
      accountId,
      amount: -51,
      note: 'x',
      reference: null,
      idempotencyKey: 'adj',
      now: new Date(),
    });
    t.equal(await below.catch(codeOf), 'invalid_state');
    await assertLedgerInvariant(t, store, accountId);
  });

  t.test('usage is counted from the tasks, grouped as asked', async (t) => {
    const store = await open(t);
    const { accountId, key } = await accountWithKey(store, 10_000, 10_000);
    for (const model of ['alpha-pro', 'alpha-pro', 'beta-v5-pro'])
      await store.tasks.insertTaskWithDebit(task(accountId, key.id, model), { maxActiveTasks: 1000, key });
    const beta = (await store.tasks.listTasks(accountId, { limit: 10, model: 'beta-v5-pro' })).items[0];
    await store.tasks.cancelTask(accountId, beta.id, new Date());
    const from = new Date(Date.now() - 86_400_000);
    const to = new Date(Date.now() + 86_400_000);
    const rows = await store.usage.usage({ from, to, groupBy: ['model', 'key'], accountId });
    t.match(rows, [
      { model: 'alpha-pro', key_id: key.id, tasks: 2, canceled: 0, tokens_refunded: 0 },
      { model: 'beta-v5-pro', key_id: key.id, tasks: 1, canceled: 1, tokens_refunded: beta.cost },
    ]);
    const [total] = await store.usage.usage({ from, to, groupBy: [], accountId });
    t.match(total, { tasks: 3, tokens_charged: 50 + beta.cost, canceled: 1, failed: 0, images: 0 });
    t.same(await store.usage.usage({ from: to, to: new Date(to.getTime() + 1000), groupBy: ['day'], accountId }), []);
  });

  t.test(
    "a key's spend with and without a budget, beside another key and another account (decision 0038)",
    async (t) => {
      const store = await open(t);
      const { accountId, key: budgeted } = await accountWithKey(store, 10_000, 10_000);
      const now = new Date();
      const plain = await store.accounts.insertApiKey({
        id: newIdAt(now),
        accountId,
        name: 'plain',
        prefix: `igk_${newIdAt(now).slice(-8)}`,
        hash: newIdAt(now),
        now,
      });
      const other = await accountWithKey(store, 10_000, 10_000);
      const limits = { maxActiveTasks: 1000 };
      for (const model of ['alpha-pro', 'beta-v5-pro', 'alpha-pro'])
        await store.tasks.insertTaskWithDebit(task(accountId, plain.id, model), {
          ...limits,
          key: { id: plain.id, scope: plain.scope },
        });
      await store.tasks.insertTaskWithDebit(task(accountId, budgeted.id), { ...limits, key: budgeted });
      await store.tasks.insertTaskWithDebit(task(other.accountId, other.key.id), { ...limits, key: other.key });
      const plainTasks = (await store.tasks.listTasks(accountId, { limit: 10 })).items.filter(
        (item) => item.keyId === plain.id,
      );
      t.equal(plainTasks.length, 3);
      await store.tasks.cancelTask(accountId, plainTasks[0].id, new Date());
      const hourAgo = new Date(Date.now() - 3_600_000);
      const cost = (tasks: { cost: number }[]) => tasks.reduce((sum, item) => sum + item.cost, 0);
      t.equal(await store.accounts.keySpentSince(plain.id, hourAgo), cost(plainTasks.slice(1)), 'without a budget');
      t.equal(await store.accounts.keySpentSince(budgeted.id, hourAgo), 25, 'with a budget');
      t.equal(await store.accounts.keySpentSince(other.key.id, hourAgo), 25, "the other account's key");
      t.equal(await store.accounts.keySpentSince(plain.id, new Date(Date.now() + 60_000)), 0, 'none since');
      t.equal(await store.accounts.keySpentSince('no-such-key', hourAgo), 0);
    },
  );

  t.test("an account's usage counts only its tasks within the range", async (t) => {
    const store = await open(t);
    const { accountId, key } = await accountWithKey(store, 10_000, 10_000);
    const other = await accountWithKey(store, 10_000, 10_000);
    const at = (ms: number, accountOf: string, keyOf: string, model: string) => {
      const when = new Date(ms);
      return createTask({ model, prompt: 'a lighthouse' } as never, {
        accountId: accountOf,
        now: when,
        newId: () => newIdAt(when),
        keyId: keyOf,
      });
    };
    const day = 86_400_000;
    const start = Date.UTC(2026, 10, 10);
    const limits = { maxActiveTasks: 1000, key };
    // Before the range, two days in it (two models), after it; and another account's task in it.
    for (const [ms, model] of [
      [start - 1, 'alpha-pro'],
      [start, 'alpha-pro'],
      [start + day + 5, 'beta-v5-pro'],
      [start + day + 6, 'alpha-pro'],
      [start + 2 * day, 'alpha-pro'],
    ] as const)
      await store.tasks.insertTaskWithDebit(at(ms, accountId, key.id, model), limits);
    await store.tasks.insertTaskWithDebit(at(start + 10, other.accountId, other.key.id, 'alpha-pro'), {
      maxActiveTasks: 1000,
      key: other.key,
    });
    const rows = await store.usage.usage({
      from: new Date(start),
      to: new Date(start + 2 * day),
      groupBy: ['day', 'model'],
      accountId,
    });
    t.match(rows, [
      { day: '2026-11-10', model: 'alpha-pro', tasks: 1 },
      { day: '2026-11-11', model: 'alpha-pro', tasks: 1 },
      { day: '2026-11-11', model: 'beta-v5-pro', tasks: 1 },
    ]);
    t.equal(rows.length, 3);
    const all = await store.usage.usage({ from: new Date(start), to: new Date(start + 2 * day), groupBy: ['account'] });
    t.match(all, [
      { account_id: accountId, tasks: 3 },
      { account_id: other.accountId, tasks: 1 },
    ]);
  });

  t.test('the audit log is append-only, newest first', async (t) => {
    const store = await open(t);
    const entry = (at: Date) => ({
      id: newIdAt(at),
      adminKeyId: null,
      action: 'GET /admin/v1/accounts',
      target: null,
      statusCode: 401,
      requestId: 'r',
      clientAddress: '127.0.0.1',
      createdAt: at,
    });
    const first = entry(new Date());
    const second = entry(new Date(first.createdAt.getTime() + 1));
    await store.admin.appendAudit(first);
    await store.admin.appendAudit(second);
    const page = await store.admin.listAudit({ limit: 1 });
    t.equal(page.items[0].id, second.id);
    t.equal((await store.admin.listAudit({ limit: 1, cursor: page.nextCursor as string })).items[0].id, first.id);
    // No port method changes an entry; the tables refuse it too.
    const raw = store as unknown as {
      database: { statement?: (sql: string) => { run(): unknown }; query?: (sql: string) => Promise<unknown> };
    };
    for (const sql of ['UPDATE admin_audit_log SET status_code = 200', 'DELETE FROM admin_audit_log']) {
      const attempt = async () =>
        raw.database.statement ? raw.database.statement(sql).run() : await raw.database.query?.(sql);
      await t.rejects(attempt(), /append-only/, sql);
    }
  });
}
