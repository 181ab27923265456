import t from 'tap';
import type { Test } from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import type { Store, StoredResponse } from '../../src/store/port.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';

/**
 * Money and idempotency rules of the store port, written once and run over every adapter. The
 * concurrency cases start every call before awaiting any, so an adapter that checks and then acts
 * in separate steps loses.
 */
interface Adapter {
  name: string;
  /** A store on dir (a new one by default); opening the same dir again sees what was committed. */
  open(t: Test, dir?: string): Promise<Store>;
}

const ADAPTERS: Adapter[] = [
  {
    name: 'sqlite',
    async open(t, dir = t.testdir({})) {
      const store = new SqliteStore(`${dir}/store.sqlite`);
      await store.migrate();
      t.teardown(() => store.close());
      return store;
    },
  },
];

const HOUR = 60 * 60 * 1000;

async function newAccount(store: Store, tokens: number): Promise<string> {
  const now = new Date();
  const account = await store.createAccount({ id: newIdAt(now), name: 'money', initialTokens: tokens, now });
  return account.id;
}

/** alpha-pro at 1K costs 25 tokens; 4K costs 50. */
function newTask(accountId: string, resolution: '1K' | '4K' = '1K'): TaskRecord {
  const now = new Date();
  return createTask(
    { model: 'alpha-pro', prompt: 'a lighthouse at dawn', parameters: { resolution } } as never,
    { accountId, now, newId: () => newIdAt(now) },
  );
}

const codeOf = (reason: unknown) => (reason instanceof DomainError ? reason.code : String(reason));

for (const adapter of ADAPTERS) {
  t.test(`${adapter.name}: money`, async (t) => {
    t.test('50 concurrent debits of 25 against a balance of 100: exactly 4 succeed', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 100);
      const tasks = Array.from({ length: 50 }, () => newTask(accountId));
      const results = await Promise.allSettled(tasks.map((task) => store.insertTaskWithDebit(task, { maxActiveTasks: 1000 })));

      t.equal(results.filter((r) => r.status === 'fulfilled').length, 4, '4 inserted');
      const refusals = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => codeOf(r.reason));
      t.same([...new Set(refusals)], ['insufficient_tokens'], 'every refusal is insufficient_tokens');
      t.equal(refusals.length, 46);
      t.equal((await store.getAccount(accountId))!.balance, 0, 'balance 0');
      t.equal((await store.listTasks(accountId, { limit: 100 })).items.length, 4, '4 tasks stored, none for the refusals');
      t.same(await store.ledgerTotals(accountId), { grant: 100, debit: 100, refund: 0 });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('a debit that does not fit changes nothing', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 40);
      const task = newTask(accountId, '4K');
      await t.rejects(store.insertTaskWithDebit(task, { maxActiveTasks: 10 }), { code: 'insufficient_tokens' });
      t.equal(await store.getTask(accountId, task.id), null, 'no task');
      t.equal((await store.getAccount(accountId))!.balance, 40);
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('the active-task cap holds under concurrency and refuses without debiting', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 10_000);
      const results = await Promise.allSettled(Array.from({ length: 20 }, () => store.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 3 })));
      t.equal(results.filter((r) => r.status === 'fulfilled').length, 3);
      const refusals = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => codeOf(r.reason));
      t.same([...new Set(refusals)], ['too_many_active_tasks']);
      t.equal((await store.getAccount(accountId))!.balance, 10_000 - 3 * 25, 'only the 3 accepted were debited');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('an account both at its cap and short of tokens is refused for the cap', async (t) => {
      // The cap is the one a client can wait out (429 with Retry-After); a 402 would send it to top up.
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 50);
      await store.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 1 });
      await t.rejects(store.insertTaskWithDebit(newTask(accountId, '4K'), { maxActiveTasks: 1 }), { code: 'too_many_active_tasks' }, 'at the cap, 25 tokens for a 50-token task');
      await t.rejects(store.insertTaskWithDebit(newTask(accountId, '4K'), { maxActiveTasks: 2 }), { code: 'insufficient_tokens' }, 'under the cap: the balance refuses');
      t.equal((await store.getAccount(accountId))!.balance, 25, 'neither refusal debited');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('refundTask called 10 times concurrently refunds once', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 100);
      const task = newTask(accountId);
      await store.insertTaskWithDebit(task, { maxActiveTasks: 10 });
      const results = await Promise.all(Array.from({ length: 10 }, () => store.refundTask(task.id, new Date())));
      t.equal(results.filter(Boolean).length, 1, 'exactly one call made the refund');
      t.equal((await store.getAccount(accountId))!.balance, 100, 'cost given back once');
      t.same(await store.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 25 });
      t.equal(await store.refundTask(task.id, new Date()), false, 'a later call refunds nothing');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('creates started together settle one by one: a refused or failing one changes nothing for the others', async (t) => {
      const store = await adapter.open(t);
      const rich = await newAccount(store, 1000);
      const poor = await newAccount(store, 30);
      const stored = newTask(rich);
      await store.insertTaskWithDebit(stored, { maxActiveTasks: 100 });

      // Started in the same turn, so an adapter that commits them together must still keep them apart.
      const attempts = [
        newTask(rich),
        newTask(poor),
        newTask(poor), // 30 tokens cover one 25-token task
        { ...newTask(rich), id: stored.id }, // a duplicate id fails on the primary key
        newTask(rich),
      ];
      const results = await Promise.allSettled(attempts.map((task) => store.insertTaskWithDebit(task, { maxActiveTasks: 100 })));
      t.same(
        results.map((r) => r.status),
        ['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled'],
      );
      t.equal(codeOf((results[2] as PromiseRejectedResult).reason), 'insufficient_tokens');
      t.notOk((results[3] as PromiseRejectedResult).reason instanceof DomainError, 'the duplicate fails as a storage error');
      t.same(await store.ledgerTotals(rich), { grant: 1000, debit: 3 * 25, refund: 0 }, 'the duplicate was not charged');
      t.same(await store.ledgerTotals(poor), { grant: 30, debit: 25, refund: 0 });
      for (const i of [0, 1, 4]) t.ok(await store.getTask(attempts[i].accountId, attempts[i].id), `task ${i} stored`);
      t.equal((await store.getTask(rich, stored.id))!.prompt, stored.prompt, 'the stored task is untouched');
      await assertLedgerInvariant(t, store, rich);
      await assertLedgerInvariant(t, store, poor);
    });

    t.test('a create queued when the store closes is committed before it closes', async (t) => {
      const dir = t.testdir({});
      const store = await adapter.open(t, dir);
      const accountId = await newAccount(store, 100);
      const task = newTask(accountId);
      const inserted = store.insertTaskWithDebit(task, { maxActiveTasks: 10 });
      await store.close();
      await inserted;
      const reopened = await adapter.open(t, dir);
      t.ok(await reopened.getTask(accountId, task.id));
      t.equal((await reopened.getAccount(accountId))!.balance, 75);
    });

    t.test('refundTask of an unknown task does nothing', async (t) => {
      const store = await adapter.open(t);
      t.equal(await store.refundTask(newIdAt(new Date()), new Date()), false);
    });

    t.test('grantTokens adds a grant entry; an unknown account is not_found', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const account = await store.grantTokens({ accountId, amount: 70, note: 'top-up', now: new Date() });
      t.equal(account.balance, 70);
      const page = await store.listLedger(accountId, { limit: 10 });
      t.match(page.items, [{ kind: 'grant', amount: 70, balanceAfter: 70, note: 'top-up', taskId: null }]);
      await t.rejects(store.grantTokens({ accountId: newIdAt(new Date()), amount: 1, note: null, now: new Date() }), { code: 'not_found' });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('listLedger pages newest first without gaps or repeats', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 1000);
      for (let i = 0; i < 6; i++) await store.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 100 });
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.listLedger(accountId, { limit: 3, cursor });
        seen.push(...page.items.map((e) => e.id));
        cursor = page.nextCursor ?? undefined;
        pages++;
      } while (cursor);
      t.equal(pages, 3, '7 entries in pages of 3');
      t.equal(seen.length, 7);
      t.equal(new Set(seen).size, 7, 'no repeats');
      t.same([...seen].sort((a, b) => Number(b) - Number(a)), seen, 'newest first');
      await assertLedgerInvariant(t, store, accountId);
    });
  });

  t.test(`${adapter.name}: idempotency keys`, async (t) => {
    const response: StoredResponse = {
      statusCode: 202,
      headers: { location: '/api/v1/images/generations/x', 'content-type': 'application/json; charset=utf-8' },
      body: Buffer.from('{"data":{"task_id":"x"}}'),
    };
    const claimInput = (accountId: string, over: Partial<{ key: string; fingerprint: string; leaseToken: string; now: Date }> = {}) => ({
      accountId,
      key: 'key-1',
      fingerprint: 'fp-1',
      leaseToken: 'token-1',
      now: new Date(),
      leaseMs: 60_000,
      ttlMs: 24 * HOUR,
      ...over,
    });

    t.test('first claim acquires; a second while in flight is in_progress; another fingerprint is a mismatch', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      t.same(await store.claimIdempotencyKey(claimInput(accountId)), { outcome: 'acquired' });
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2' })), { outcome: 'in_progress' });
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-3', fingerprint: 'fp-2' })), { outcome: 'fingerprint_mismatch' });
    });

    t.test('concurrent claims: exactly one acquires', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claimIdempotencyKey(claimInput(accountId, { leaseToken: `t${i}` }))));
      t.equal(claims.filter((c) => c.outcome === 'acquired').length, 1);
      t.equal(claims.filter((c) => c.outcome === 'in_progress').length, 19);
    });

    t.test('a completed key replays the stored response', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      await store.claimIdempotencyKey(claimInput(accountId));
      t.equal(await store.completeIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1', response }), true);
      const replay = await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2' }));
      t.equal(replay.outcome, 'replay');
      if (replay.outcome === 'replay') {
        t.equal(replay.response.statusCode, 202);
        t.same(replay.response.headers, response.headers);
        t.equal(replay.response.body.toString(), response.body.toString());
      }
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { fingerprint: 'fp-2' })), { outcome: 'fingerprint_mismatch' }, 'a completed key is bound to its body');
    });

    t.test('keys are scoped to the account', async (t) => {
      const store = await adapter.open(t);
      const a = await newAccount(store, 0);
      const b = await newAccount(store, 0);
      t.same(await store.claimIdempotencyKey(claimInput(a)), { outcome: 'acquired' });
      t.same(await store.claimIdempotencyKey(claimInput(b, { fingerprint: 'other' })), { outcome: 'acquired' });
    });

    t.test('a released key can be claimed again, with any body', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      await store.claimIdempotencyKey(claimInput(accountId));
      await store.releaseIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1' });
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2', fingerprint: 'fp-2' })), { outcome: 'acquired' });
    });

    t.test('an abandoned in-flight key is taken over after its lease, and the old holder is fenced out', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.claimIdempotencyKey(claimInput(accountId, { now: new Date(start) }));
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2', now: new Date(start + 59_999) })), { outcome: 'in_progress' }, 'lease still live');
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2', now: new Date(start + 60_000) })), { outcome: 'acquired' }, 'taken over');

      t.equal(await store.completeIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1', response }), false, 'the old holder cannot complete');
      await store.releaseIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1' });
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-3', now: new Date(start + 60_001) })), { outcome: 'in_progress' }, 'nor release the new holder');
      t.equal(await store.completeIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-2', response }), true, 'the new holder completes');
    });

    t.test('an abandoned key with another body stays bound to its first body', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.claimIdempotencyKey(claimInput(accountId, { now: new Date(start) }));
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { fingerprint: 'fp-2', now: new Date(start + 120_000) })), { outcome: 'fingerprint_mismatch' });
    });

    t.test('after 24 h a key starts afresh, and the sweeper deletes only expired keys', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.claimIdempotencyKey(claimInput(accountId, { key: 'old', now: new Date(start) }));
      await store.completeIdempotencyKey({ accountId, key: 'old', leaseToken: 'token-1', response });
      await store.claimIdempotencyKey(claimInput(accountId, { key: 'abandoned', now: new Date(start) }));
      await store.claimIdempotencyKey(claimInput(accountId, { key: 'recent', now: new Date(start + 23 * HOUR) }));

      const later = new Date(start + 24 * HOUR);
      t.same(
        await store.claimIdempotencyKey(claimInput(accountId, { key: 'old', fingerprint: 'fp-new', leaseToken: 'token-9', now: later })),
        { outcome: 'acquired' },
        'an expired, unswept key is reusable',
      );
      t.equal(await store.deleteExpiredIdempotencyKeys(later, 100), 1, 'only the abandoned row had expired (old was renewed)');
      t.equal(await store.deleteExpiredIdempotencyKeys(later, 100), 0, 'sweeping twice deletes nothing more');
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { key: 'recent', fingerprint: 'fp-x', now: later })), { outcome: 'fingerprint_mismatch' }, 'unexpired keys stay');
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { key: 'abandoned', fingerprint: 'fp-x', now: later })), { outcome: 'acquired' }, 'the swept key is free');
      t.equal(await store.deleteExpiredIdempotencyKeys(new Date(start + 49 * HOUR), 100), 3, 'everything expires');
    });

    t.test('the sweeper deletes at most its limit per call, the keys that expired first', async (t) => {
      const store = await adapter.open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      for (let i = 0; i < 5; i++) await store.claimIdempotencyKey(claimInput(accountId, { key: `k${i}`, now: new Date(start + i * 1000) }));
      const later = new Date(start + 25 * HOUR);
      t.equal(await store.deleteExpiredIdempotencyKeys(later, 2), 2, 'two of five');
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { key: 'k2', fingerprint: 'fp-x', now: new Date(start + 3000) })), { outcome: 'fingerprint_mismatch' }, 'k2 (third to expire) is still there');
      t.same(await store.claimIdempotencyKey(claimInput(accountId, { key: 'k1', fingerprint: 'fp-x', now: later })), { outcome: 'acquired' }, 'k1 (second to expire) is gone: claiming it starts afresh');
      t.equal(await store.deleteExpiredIdempotencyKeys(later, 2), 2);
      t.equal(await store.deleteExpiredIdempotencyKeys(later, 2), 1, 'the last one; fewer than the limit: done');
    });
  });
}
