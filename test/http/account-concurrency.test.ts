// Not in the PostgreSQL pass: each of its tests runs on every store in the first pass (testOnEveryStore).
import t from 'tap';
import { fileTestApp } from '../helpers/app.js';
import { everyStoreFileTestApp } from '../helpers/file-apps.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { testOnEveryStore } from '../helpers/store.js';

/**
 * Money under concurrent requests. The injected requests all run through the async hooks together,
 * so any check of the balance made apart from the debit would let more than the balance through.
 */
const CREATE = '/api/v1/images/generations';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' }; // 25 tokens

// Two configurations, each on every store adapter; the tests keep apart by their own accounts.
const appOn = everyStoreFileTestApp(fileTestApp());
const CAPPED = { MAX_ACTIVE_TASKS: '3' };
const cappedAppOn = everyStoreFileTestApp(fileTestApp(CAPPED), CAPPED);

testOnEveryStore(
  t,
  'balance 100, 50 concurrent creates of 25: exactly 4 accepted, 46 refused with 402',
  async (t, storeAdapter) => {
    const { app, store, newAccount } = await appOn(storeAdapter);
    const { accountId, auth } = await newAccount(100);

    const responses = await Promise.all(
      Array.from({ length: 50 }, () => app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })),
    );

    const accepted = responses.filter((r) => r.statusCode === 202);
    const refused = responses.filter((r) => r.statusCode === 402);
    t.equal(accepted.length, 4, '4 accepted');
    t.equal(refused.length, 46, '46 refused');
    for (const r of refused) {
      t.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
      t.equal(r.json().code, 'insufficient_tokens');
    }
    t.same(
      accepted.map((r) => r.json().data.cost),
      [25, 25, 25, 25],
    );

    t.equal((await store.accounts.getAccount(accountId))!.balance, 0, 'balance 0');
    const tasks = await store.tasks.listTasks(accountId, { limit: 100 });
    t.equal(tasks.items.length, 4, '4 tasks exist');
    t.same(
      tasks.items.map((task) => task.id).sort(),
      accepted.map((r) => r.json().data.task_id).sort(),
      'the stored tasks are exactly the accepted ones',
    );
    t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 100, refund: 0 }, 'ledger sums match');
    await assertLedgerInvariant(t, store, accountId);
  },
);

testOnEveryStore(
  t,
  'the active-task cap holds under 20 concurrent creates, and refusals cost nothing',
  async (t, storeAdapter) => {
    const { app, store, newAccount } = await cappedAppOn(storeAdapter);
    const { accountId, auth } = await newAccount(10_000);

    const responses = await Promise.all(
      Array.from({ length: 20 }, () => app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })),
    );

    t.equal(responses.filter((r) => r.statusCode === 202).length, 3);
    const refused = responses.filter((r) => r.statusCode === 429);
    t.equal(refused.length, 17);
    for (const r of refused) {
      t.equal(r.json().code, 'too_many_active_tasks');
      t.ok(Number(r.headers['retry-after']) > 0, 'Retry-After on every 429');
    }
    t.equal((await store.accounts.getAccount(accountId))!.balance, 10_000 - 3 * 25);
    await assertLedgerInvariant(t, store, accountId);
  },
);

testOnEveryStore(
  t,
  "concurrent creates from two accounts never touch each other's balance",
  async (t, storeAdapter) => {
    const { app, store, newAccount } = await appOn(storeAdapter);
    const a = await newAccount(50);
    const b = await newAccount(75);
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        app.inject({ method: 'POST', url: CREATE, headers: (i % 2 ? a : b).auth, payload: BODY }),
      ),
    );
    t.equal(responses.filter((r) => r.statusCode === 202).length, 2 + 3);
    t.equal((await store.accounts.getAccount(a.accountId))!.balance, 0);
    t.equal((await store.accounts.getAccount(b.accountId))!.balance, 0);
    await assertLedgerInvariant(t, store, a.accountId);
    await assertLedgerInvariant(t, store, b.accountId);
  },
);
