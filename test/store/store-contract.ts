import { SEED_MAX } from '../../schemas/model-entry.js';
import type { Test } from 'tap';
import { TASK_STATUSES } from '../../schemas/resources.js';
import { DomainError } from '../../src/core/errors.js';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { encodeCursor } from '../../src/store/cursor.js';
import type { UpstreamOutcome } from '../../src/core/backend-capacity.js';
import type { ClaimPolicy, GeneratedMediaInput, Store, StoredResponse, TaskListQuery } from '../../src/store/port.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { businessContract } from './business-contract.js';
import type { StoreAdapterUnderTest } from '../helpers/store.js';
import { claimNextTask } from '../helpers/store.js';
import { storeUpload } from '../helpers/uploads.js';
import { allPages, mixedTasks, MIX_START, MIXED_MODELS, newestFirst } from '../helpers/task-mix.js';

/**
 * The Store port's contract, written once and run over every adapter (test/store/*-store.test.ts).
 * The concurrency cases start every call before awaiting any, so an adapter that checks and then
 * acts in separate steps loses.
 */

const HOUR = 60 * 60 * 1000;
const LIMITS = { maxActiveTasks: 1000 };
const REPLAY_BUDGET = { perDelivery: 10, perAccount: 100, windowMs: HOUR };
const codeOf = (reason: unknown) => (reason instanceof DomainError ? reason.code : String(reason));

async function newAccount(store: Store, tokens: number, name = 'contract'): Promise<string> {
  const now = new Date();
  return (await store.accounts.createAccount({ id: newIdAt(now), name, initialTokens: tokens, now })).id;
}

/** alpha-pro at 1K costs 25 tokens; 4K costs 50. */
function newTask(
  accountId: string,
  options: { resolution?: '1K' | '4K'; createdAt?: Date; webhookUrl?: string; references?: string[] } = {},
): TaskRecord {
  const now = options.createdAt ?? new Date();
  return createTask(
    {
      model: 'alpha-pro',
      prompt: 'a lighthouse at dawn',
      parameters: { resolution: options.resolution ?? '1K' },
      ...(options.webhookUrl ? { webhook_url: options.webhookUrl } : {}),
      ...(options.references ? { image_reference: options.references } : {}),
    } as never,
    { accountId, now, newId: () => newIdAt(now) },
  );
}

const policy = (now = new Date(), over: Partial<ClaimPolicy> = {}): ClaimPolicy => ({
  now,
  leaseMs: 60_000,
  maxAttempts: 3,
  deadlineMs: HOUR,
  ...over,
});

/** A generated image's row input whose blob is reserved, as the worker does before it writes the blob. */
async function reservedResult(store: Store, now: Date): Promise<GeneratedMediaInput> {
  const id = newIdAt(now);
  const blobKey = `results/${id}`;
  await store.media.scheduleBlobDeletion(blobKey, new Date(now.getTime() + 60_000));
  return {
    id,
    blobKey,
    contentType: 'image/png',
    width: 1024,
    height: 1024,
    sizeBytes: 10,
    sha256: 'ab',
    expiresAt: new Date(now.getTime() + HOUR),
  };
}

/**
 * How many tests of a group run at once, each on a store of its own: a test mostly waits for its
 * store (a PostgreSQL round trip, an fsync), so several together take little longer than one. The
 * groups themselves run CONTRACT_JOBS at once too (set by the files that run the contract).
 */
export const CONTRACT_JOBS = 3;

export function storeContract(t: Test, adapter: StoreAdapterUnderTest): void {
  const open = async (t: Test) => (await adapter.open(t)).store;

  t.test('accounts and API keys', { jobs: CONTRACT_JOBS }, async (t) => {
    t.test('an account is created with its opening grant, read back and counted', async (t) => {
      const store = await open(t);
      const before = await store.accounts.countAccounts();
      const now = new Date();
      const id = newIdAt(now);
      const account = await store.accounts.createAccount({ id, name: 'acme', initialTokens: 70, now });
      t.match(account, { id, name: 'acme', balance: 70 });
      t.equal(account.createdAt.getTime(), now.getTime(), 'createdAt round-trips to the millisecond');
      t.strictSame(await store.accounts.getAccount(id), account);
      t.equal(await store.accounts.getAccount(newIdAt(now)), null, 'an unknown account is null');
      t.equal(await store.accounts.countAccounts(), before + 1);
      t.match((await store.accounts.listLedger(id, { limit: 10 })).items, [
        { kind: 'grant', amount: 70, balanceAfter: 70, note: 'opening balance' },
      ]);
      const empty = await newAccount(store, 0);
      t.same((await store.accounts.listLedger(empty, { limit: 10 })).items, [], 'no grant entry for 0 tokens');
      await assertLedgerInvariant(t, store, id);
    });

    t.test('a key is found by its hash with its account until it is revoked', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 40);
      const now = new Date();
      const key = await store.accounts.insertApiKey({
        id: newIdAt(now),
        accountId,
        name: 'ci',
        prefix: 'ig_abc12345',
        hash: 'h'.repeat(64),
        now,
      });
      t.match(key, { accountId, name: 'ci', prefix: 'ig_abc12345', lastUsedAt: null, revokedAt: null });
      const found = await store.accounts.findActiveApiKey('h'.repeat(64));
      t.strictSame(found?.key, key);
      t.match(found?.account, { id: accountId, balance: 40 });
      t.equal(await store.accounts.findActiveApiKey('x'.repeat(64)), null, 'an unknown hash');

      await store.accounts.markApiKeyUsed(key.id, new Date(now.getTime() + 5));
      t.equal(
        (await store.accounts.listApiKeys(accountId))[0].lastUsedAt?.getTime(),
        now.getTime() + 5,
        'last use recorded',
      );

      t.equal(await store.accounts.revokeApiKey('ig_abc12345', now), true, 'revoked by prefix');
      t.equal(await store.accounts.findActiveApiKey('h'.repeat(64)), null, 'a revoked key is not found');
      t.equal(await store.accounts.revokeApiKey(key.id, now), false, 'revoking twice matches nothing');
      t.ok((await store.accounts.listApiKeys(accountId))[0].revokedAt, 'listed with its revocation');
    });

    t.test('keys are listed per account in creation order, or all of them', async (t) => {
      const store = await open(t);
      const a = await newAccount(store, 0);
      const b = await newAccount(store, 0);
      const base = Date.now();
      for (const [i, accountId] of [a, b, a].entries()) {
        const now = new Date(base + i);
        await store.accounts.insertApiKey({
          id: newIdAt(now),
          accountId,
          name: `k${i}`,
          prefix: `ig_p${i}${base}`,
          hash: `hash-${i}-${base}`,
          now,
        });
      }
      t.strictSame(
        (await store.accounts.listApiKeys(a)).map((k) => k.name),
        ['k0', 'k2'],
      );
      const all = (await store.accounts.listApiKeys()).filter((k) => k.accountId === a || k.accountId === b);
      t.strictSame(
        all.map((k) => k.name),
        ['k0', 'k1', 'k2'],
      );
      t.equal(await store.accounts.revokeApiKey('ig_nothing', new Date()), false);
    });

    t.test('keys made in the same millisecond list in the same order on every adapter (by id)', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const now = new Date();
      // Ids given out of order on purpose: the tie is broken by id, not by insertion.
      for (const id of ['0190f0a0-0000-7000-8000-000000000002', '0190f0a0-0000-7000-8000-000000000001'])
        await store.accounts.insertApiKey({
          id,
          accountId,
          name: id.slice(-1),
          prefix: `ig_t${id.slice(-1)}${now.getTime()}`,
          hash: `h-${id}`,
          now,
        });
      t.strictSame(
        (await store.accounts.listApiKeys(accountId)).map((k) => k.name),
        ['1', '2'],
      );
    });
  });

  t.test('money', { jobs: CONTRACT_JOBS }, async (t) => {
    t.test('50 concurrent debits of 25 against a balance of 100: exactly 4 succeed', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 100);
      const tasks = Array.from({ length: 50 }, () => newTask(accountId));
      const results = await Promise.allSettled(tasks.map((task) => store.tasks.insertTaskWithDebit(task, LIMITS)));

      t.equal(results.filter((r) => r.status === 'fulfilled').length, 4, '4 inserted');
      const refusals = results
        .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
        .map((r) => codeOf(r.reason));
      t.same([...new Set(refusals)], ['insufficient_tokens'], 'every refusal is insufficient_tokens');
      t.equal(refusals.length, 46);
      t.equal((await store.accounts.getAccount(accountId))!.balance, 0, 'balance 0');
      t.equal(
        (await store.tasks.listTasks(accountId, { limit: 100 })).items.length,
        4,
        '4 tasks stored, none for the refusals',
      );
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 100, refund: 0 });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('a debit that does not fit changes nothing', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 40);
      const task = newTask(accountId, { resolution: '4K' });
      await t.rejects(store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 }), { code: 'insufficient_tokens' });
      t.equal(await store.tasks.getTask(accountId, task.id), null, 'no task');
      t.equal((await store.accounts.getAccount(accountId))!.balance, 40);
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('insertTasksWithDebits stores and debits every task of a group, or none of them', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 100);
      const group = [newTask(accountId), newTask(accountId)];
      await store.tasks.insertTasksWithDebits(group, LIMITS);
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 50, refund: 0 }, 'both debited');
      for (const task of group) t.ok(await store.tasks.getTask(accountId, task.id), 'stored');

      // 30 tokens: the first task of the group fits alone, the second does not; neither is kept.
      const tooFew = await store.accounts.createAccount({
        id: newIdAt(new Date()),
        name: 'contract',
        initialTokens: 30,
        now: new Date(),
      });
      const overBudget = [newTask(tooFew.id), newTask(tooFew.id)];
      await t.rejects(store.tasks.insertTasksWithDebits(overBudget, LIMITS), { code: 'insufficient_tokens' });
      for (const task of overBudget) t.equal(await store.tasks.getTask(tooFew.id, task.id), null, 'no task kept');
      t.equal((await store.accounts.getAccount(tooFew.id))!.balance, 30, 'the first debit was undone');
      // Two active already, a cap of 3: the first of these fits, the second does not; neither is kept.
      const refused = [newTask(accountId), newTask(accountId)];
      await t.rejects(store.tasks.insertTasksWithDebits(refused, { maxActiveTasks: 3 }), {
        code: 'too_many_active_tasks',
      });
      for (const task of refused) t.equal(await store.tasks.getTask(accountId, task.id), null, 'no task kept');
      t.equal((await store.accounts.getAccount(accountId))!.balance, 50);
      await assertLedgerInvariant(t, store, accountId);
      await assertLedgerInvariant(t, store, tooFew.id);
    });

    t.test('refundTask called 10 times concurrently refunds once', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 100);
      const task = newTask(accountId);
      await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });
      const results = await Promise.all(Array.from({ length: 10 }, () => store.tasks.refundTask(task.id, new Date())));
      t.equal(results.filter(Boolean).length, 1, 'exactly one call made the refund');
      t.equal((await store.accounts.getAccount(accountId))!.balance, 100, 'cost given back once');
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 25 });
      t.equal(await store.tasks.refundTask(task.id, new Date()), false, 'a later call refunds nothing');
      t.equal(await store.tasks.refundTask(newIdAt(new Date()), new Date()), false, 'an unknown task refunds nothing');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test(
      'creates started together settle one by one: a refused or failing one changes nothing for the others',
      async (t) => {
        const store = await open(t);
        const rich = await newAccount(store, 1000);
        const poor = await newAccount(store, 30);
        const stored = newTask(rich);
        await store.tasks.insertTaskWithDebit(stored, { maxActiveTasks: 100 });
        const attempts = [
          newTask(rich),
          newTask(poor),
          newTask(poor), // 30 tokens cover one 25-token task
          { ...newTask(rich), id: stored.id }, // a duplicate id fails on the primary key
          newTask(rich),
        ];
        const results = await Promise.allSettled(
          attempts.map((task) => store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 100 })),
        );
        t.same(
          [0, 3, 4].map((i) => results[i].status),
          ['fulfilled', 'rejected', 'fulfilled'],
          "the rich account's creates",
        );
        // The poor account's two creates race: whichever the adapter orders first gets the tokens.
        t.same(
          [1, 2].map((i) => results[i].status).sort(),
          ['fulfilled', 'rejected'],
          'one of the two 25-token creates fits in 30',
        );
        const poorRefusal = [results[1], results[2]].find((r): r is PromiseRejectedResult => r.status === 'rejected');
        t.equal(codeOf(poorRefusal?.reason), 'insufficient_tokens');
        t.notOk(
          (results[3] as PromiseRejectedResult).reason instanceof DomainError,
          'the duplicate fails as a storage error',
        );
        t.same(
          await store.accounts.ledgerTotals(rich),
          { grant: 1000, debit: 3 * 25, refund: 0 },
          'the duplicate was not charged',
        );
        t.same(await store.accounts.ledgerTotals(poor), { grant: 30, debit: 25, refund: 0 });
        for (const [i, result] of results.entries()) {
          if (i !== 3)
            t.equal(
              Boolean(await store.tasks.getTask(attempts[i].accountId, attempts[i].id)),
              result.status === 'fulfilled',
              `task ${i} stored if accepted`,
            );
        }
        t.equal((await store.tasks.getTask(rich, stored.id))!.prompt, stored.prompt, 'the stored task is untouched');
        await assertLedgerInvariant(t, store, rich);
        await assertLedgerInvariant(t, store, poor);
      },
    );

    t.test('a create still running when the store closes is committed before it closes', async (t) => {
      const opened = await adapter.open(t);
      const accountId = await newAccount(opened.store, 100);
      const task = newTask(accountId);
      const inserted = opened.store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });
      await opened.store.close();
      await inserted;
      const reopened = await opened.reopen();
      t.ok(await reopened.tasks.getTask(accountId, task.id));
      t.equal((await reopened.accounts.getAccount(accountId))!.balance, 75);
    });

    t.test('grantTokens adds a grant entry; an unknown account is not_found', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const account = await store.accounts.grantTokens({ accountId, amount: 70, note: 'top-up', now: new Date() });
      t.equal(account.balance, 70);
      const page = await store.accounts.listLedger(accountId, { limit: 10 });
      t.match(page.items, [{ kind: 'grant', amount: 70, balanceAfter: 70, note: 'top-up', taskId: null }]);
      await t.rejects(
        store.accounts.grantTokens({ accountId: newIdAt(new Date()), amount: 1, note: null, now: new Date() }),
        {
          code: 'not_found',
        },
      );
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('concurrent grants and debits keep the ledger a chain', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 50);
      await Promise.allSettled([
        ...Array.from({ length: 10 }, () =>
          store.accounts.grantTokens({ accountId, amount: 25, note: null, now: new Date() }),
        ),
        ...Array.from({ length: 20 }, () => store.tasks.insertTaskWithDebit(newTask(accountId), LIMITS)),
      ]);
      const totals = await store.accounts.ledgerTotals(accountId);
      t.equal(totals.grant, 300);
      t.ok(
        totals.debit >= 50 && totals.debit <= 300,
        'at least the opening balance was spent, never more than granted',
      );
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('ledger entry ids are distinct UUIDv7s, newest first', async (t) => {
      const store = await open(t);
      const one = await newAccount(store, 100, 'one');
      for (let i = 0; i < 3; i++)
        await store.accounts.grantTokens({ accountId: one, amount: 1, note: null, now: new Date() });
      const entries = (await store.accounts.listLedger(one, { limit: 10 })).items;
      t.same(
        entries.map((e) => e.balanceAfter),
        [103, 102, 101, 100],
        'newest first',
      );
      const ids = entries.map((e) => e.id);
      t.equal(new Set(ids).size, 4);
      t.ok(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)));
    });

    t.test('listLedger pages newest first without gaps or repeats', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 1000);
      for (let i = 0; i < 6; i++) await store.tasks.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 100 });
      const seen: { id: string; kind: string }[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.accounts.listLedger(accountId, { limit: 3, cursor });
        seen.push(...page.items);
        cursor = page.nextCursor ?? undefined;
        pages++;
      } while (cursor);
      t.equal(pages, 3, '7 entries in pages of 3');
      t.equal(seen.length, 7);
      t.equal(new Set(seen.map((e) => e.id)).size, 7, 'no repeats');
      t.equal(seen[6].kind, 'grant', 'the opening grant comes last');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('listLedger refuses a cursor that is not a position it gave, alike on every adapter', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 1000);
      // Past 2^53 (would round, and return the first page again), zero, negative, not a number.
      for (const position of ['99999999999999999', '0', '-1', '1e3', 'abc'])
        await t.rejects(
          store.accounts.listLedger(accountId, { limit: 3, cursor: encodeCursor(position) }),
          { code: 'invalid_request' },
          `position ${position}`,
        );
    });
  });

  t.test('the active-task cap', { jobs: CONTRACT_JOBS }, async (t) => {
    t.test('holds under concurrency and refuses without debiting', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.tasks.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 3 })),
      );
      t.equal(results.filter((r) => r.status === 'fulfilled').length, 3);
      const refusals = results
        .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
        .map((r) => codeOf(r.reason));
      t.same([...new Set(refusals)], ['too_many_active_tasks']);
      t.equal(
        (await store.accounts.getAccount(accountId))!.balance,
        10_000 - 3 * 25,
        'only the 3 accepted were debited',
      );
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('an account both at its cap and short of tokens is refused for the cap', async (t) => {
      // The cap is the one a client can wait out (429 with Retry-After); a 402 would send it to top up.
      const store = await open(t);
      const accountId = await newAccount(store, 50);
      await store.tasks.insertTaskWithDebit(newTask(accountId), { maxActiveTasks: 1 });
      await t.rejects(
        store.tasks.insertTaskWithDebit(newTask(accountId, { resolution: '4K' }), { maxActiveTasks: 1 }),
        {
          code: 'too_many_active_tasks',
        },
      );
      await t.rejects(
        store.tasks.insertTaskWithDebit(newTask(accountId, { resolution: '4K' }), { maxActiveTasks: 2 }),
        {
          code: 'insufficient_tokens',
        },
      );
      t.equal((await store.accounts.getAccount(accountId))!.balance, 25, 'neither refusal debited');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('a task that does not count as active is not refused by the cap, and takes no room', async (t) => {
      // A task stored already finished (an import, a seeded history) adds no active task: the cap,
      // which is on active tasks, has nothing to refuse (decision 0027).
      const store = await open(t);
      const accountId = await newAccount(store, 100);
      const cap = { maxActiveTasks: 1 };
      await store.tasks.insertTaskWithDebit(newTask(accountId), cap);
      const at = new Date();
      const finished = { ...newTask(accountId), status: 'COMPLETED' as const, startedAt: at, completedAt: at };
      await store.tasks.insertTaskWithDebit(finished, cap);
      t.match(await store.tasks.getTaskById(finished.id), { status: 'COMPLETED' }, 'stored at the cap');
      t.equal((await store.accounts.getAccount(accountId))!.balance, 50, 'and charged');
      await t.rejects(store.tasks.insertTaskWithDebit(newTask(accountId), cap), { code: 'too_many_active_tasks' });
      const lowered = { ...newTask(accountId), status: 'CANCELED' as const, startedAt: at, completedAt: at };
      await store.tasks.insertTaskWithDebit(lowered, { maxActiveTasks: 0 });
      t.match(await store.tasks.getTaskById(lowered.id), { status: 'CANCELED' }, 'even past a lowered cap');
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test(
      'a finished task stored at the cap does not wake the queue: the next claim finds only the active one',
      async (t) => {
        const store = await open(t);
        const accountId = await newAccount(store, 100);
        const active = newTask(accountId);
        await store.tasks.insertTaskWithDebit(active, { maxActiveTasks: 1 });
        const at = new Date();
        await store.tasks.insertTaskWithDebit(
          { ...newTask(accountId), status: 'FAILED' as const, startedAt: at, completedAt: at },
          { maxActiveTasks: 1 },
        );
        t.equal((await claimNextTask(store.tasks, policy()))?.id, active.id);
        t.equal(await claimNextTask(store.tasks, policy()), null, 'nothing else is queued');
      },
    );

    t.test('room comes back as tasks finish by every path: complete, fail, cancel, deadline, lost lease', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const cap = { maxActiveTasks: 2 };
      const atCap = () =>
        t.rejects(store.tasks.insertTaskWithDebit(newTask(accountId), cap), { code: 'too_many_active_tasks' });
      const fits = async () => {
        const task = newTask(accountId);
        await store.tasks.insertTaskWithDebit(task, cap);
        return task;
      };
      const a = await fits();
      const b = await fits();
      await atCap();
      const claimedA = await claimNextTask(store.tasks, policy());
      t.equal(claimedA?.id, a.id, 'claiming keeps a task active');
      await atCap();
      t.ok(await store.tasks.requeueTask({ taskId: a.id, attempt: 1, runAfter: new Date(), now: new Date() }));
      await atCap();
      const again = await claimNextTask(store.tasks, policy());
      t.ok(await store.tasks.completeTask({ taskId: again!.id, attempt: again!.attempt, media: [], now: new Date() }));
      t.notOk(
        await store.tasks.completeTask({ taskId: again!.id, attempt: again!.attempt, media: [], now: new Date() }),
        'a second completion is fenced out',
      );
      const c = await fits();
      await atCap();
      await store.tasks.cancelTask(accountId, c.id, new Date());
      await t.rejects(store.tasks.cancelTask(accountId, c.id, new Date()), { code: 'invalid_state' });
      await fits();
      await atCap();
      const running = await claimNextTask(store.tasks, policy());
      t.equal(running?.id, b.id);
      t.ok(
        await store.tasks.failTask({
          taskId: b.id,
          attempt: running!.attempt,
          error: { code: 'x', message: 'x' },
          now: new Date(),
        }),
      );
      const d = await fits();
      await atCap();
      const lost = await claimNextTask(store.tasks, policy(new Date(), { leaseMs: 1 }));
      t.not(lost?.id, d.id, 'the older task is claimed with a lease that runs out');
      const next = await claimNextTask(store.tasks, policy(new Date(Date.now() + 1000), { maxAttempts: 1 }));
      t.equal(next?.id, d.id, 'the claim that fails the lost task takes the next one');
      t.match(await store.tasks.getTaskById(lost!.id), { status: 'FAILED', error: { code: 'worker_lost' } });
      const stale = newTask(accountId, { createdAt: new Date(Date.now() - 2 * HOUR) });
      await store.tasks.insertTaskWithDebit(stale, cap);
      await atCap();
      t.equal(await claimNextTask(store.tasks, policy()), null, 'past its deadline: failed, not claimed');
      await fits();
      await atCap();
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('holds while tasks finish beside the creates, and the room they free is taken once', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const cap = { maxActiveTasks: 3 };
      const first = [newTask(accountId), newTask(accountId), newTask(accountId)];
      for (const task of first) await store.tasks.insertTaskWithDebit(task, cap);
      const running = [(await claimNextTask(store.tasks, policy()))!, (await claimNextTask(store.tasks, policy()))!];
      const queued = first.find((task) => !running.some((r) => r.id === task.id))!;
      const activeNow = async () =>
        (await store.tasks.listTasks(accountId, { limit: 100, status: 'CREATED' })).items.length +
        (await store.tasks.listTasks(accountId, { limit: 100, status: 'IN_PROGRESS' })).items.length;
      const creates = (n: number) =>
        Array.from({ length: n }, () => store.tasks.insertTaskWithDebit(newTask(accountId), cap));
      const settled = await Promise.allSettled([
        ...creates(10),
        store.tasks.completeTask({ taskId: running[0].id, attempt: running[0].attempt, media: [], now: new Date() }),
        store.tasks.failTask({
          taskId: running[1].id,
          attempt: running[1].attempt,
          error: { code: 'x', message: 'x' },
          now: new Date(),
        }),
        store.tasks.cancelTask(accountId, queued.id, new Date()),
        ...creates(10),
      ]);
      t.same(
        settled.slice(10, 13).map((r) => r.status),
        ['fulfilled', 'fulfilled', 'fulfilled'],
        'the finishes all went through',
      );
      const refusals = settled
        .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
        .map((r) => codeOf(r.reason));
      t.same([...new Set(refusals)], refusals.length > 0 ? ['too_many_active_tasks'] : []);
      const admittedDuring = settled.length - 3 - refusals.length;
      t.ok(admittedDuring <= 3, `at most the freed room was taken (${admittedDuring})`);
      t.equal(await activeNow(), admittedDuring, 'the first three finished; the admitted ones are active');
      const after = await Promise.allSettled(creates(10));
      t.equal(after.filter((r) => r.status === 'fulfilled').length, 3 - admittedDuring, 'the rest of the room, once');
      t.equal(await activeNow(), 3, 'the cap, exactly');
      t.equal(
        (await store.accounts.getAccount(accountId))!.balance,
        10_000 - 25 * 6 + 2 * 25,
        'six tasks charged; the failed and the canceled refunded',
      );
      await assertLedgerInvariant(t, store, accountId);
    });
  });

  t.test('image references are checked in the create transaction', { jobs: CONTRACT_JOBS }, async (t) => {
    const setup = async (t: Test) => {
      const store = await open(t);
      return { store, accountId: await newAccount(store, 1000), otherId: await newAccount(store, 1000) };
    };

    t.test("a task whose references are the account's unexpired uploads is created and charged", async (t) => {
      const { store, accountId } = await setup(t);
      const references = [
        (await storeUpload(store, accountId, new Date())).id,
        (await storeUpload(store, accountId, new Date())).id,
      ];
      const task = newTask(accountId, { references });
      await store.tasks.insertTaskWithDebit(task, LIMITS);
      t.strictSame((await store.tasks.getTask(accountId, task.id))?.imageReference, references);
      t.equal((await store.accounts.getAccount(accountId))?.balance, 1000 - task.cost);
    });

    t.test('a bad reference is refused, naming the first bad one, and nothing is stored or charged', async (t) => {
      const { store, accountId, otherId } = await setup(t);
      const now = new Date();
      const good = (await storeUpload(store, accountId, now)).id;
      const bad: Record<string, string> = {
        unknown: newIdAt(now),
        "another account's upload": (await storeUpload(store, otherId, now)).id,
        'an upload expired when the task is made': (
          await storeUpload(store, accountId, new Date(now.getTime() - 7_200_000))
        ).id,
      };
      for (const [name, id] of Object.entries(bad)) {
        const task = newTask(accountId, { references: [good, good, id, newIdAt(now)] });
        await t.rejects(
          store.tasks.insertTaskWithDebit(task, LIMITS),
          {
            code: 'invalid_media_reference',
            fieldErrors: [{ pointer: '/image_reference/2', location: 'body', code: 'unknown_media' }],
          },
          name,
        );
        t.equal(await store.tasks.getTask(accountId, task.id), null, `${name}: no task`);
      }
      t.equal((await store.accounts.getAccount(accountId))?.balance, 1000, 'nothing charged');
      // Had a refused task been counted as active, a cap of one would refuse this one.
      await store.tasks.insertTaskWithDebit(newTask(accountId, { references: [good] }), { maxActiveTasks: 1 });
    });

    t.test(
      'an upload deleted while the create runs is refused or the create wins; never a task on a deleted upload',
      async (t) => {
        const { store, accountId } = await setup(t);
        const now = new Date();
        const upload = (await storeUpload(store, accountId, now)).id;
        const task = newTask(accountId, { references: [upload] });
        const [deleted, created] = await Promise.allSettled([
          store.media.deleteMedia(accountId, upload, now),
          store.tasks.insertTaskWithDebit(task, LIMITS),
        ]);
        t.equal(deleted.status, 'fulfilled');
        // The delete was started first: whichever order the adapter commits them in, a task that was
        // created saw the upload, and one that did not see it was refused.
        if (created.status === 'fulfilled') t.ok(await store.tasks.getTask(accountId, task.id));
        else {
          t.match(created, { status: 'rejected', reason: { code: 'invalid_media_reference' } });
          t.equal(await store.tasks.getTask(accountId, task.id), null);
          t.equal((await store.accounts.getAccount(accountId))?.balance, 1000);
        }
      },
    );
  });

  t.test('idempotency keys', { jobs: CONTRACT_JOBS }, async (t) => {
    const response: StoredResponse = {
      statusCode: 202,
      headers: { location: '/api/v1/images/generations/x', 'content-type': 'application/json; charset=utf-8' },
      body: Buffer.from('{"data":{"task_id":"x"}}'),
    };
    const claimInput = (
      accountId: string,
      over: Partial<{ key: string; fingerprint: string; leaseToken: string; now: Date }> = {},
    ) => ({
      accountId,
      key: 'key-1',
      fingerprint: 'fp-1',
      leaseToken: 'token-1',
      now: new Date(),
      leaseMs: 60_000,
      ttlMs: 24 * HOUR,
      ...over,
    });

    t.test(
      'first claim acquires; a second while in flight is in_progress; another fingerprint is a mismatch',
      async (t) => {
        const store = await open(t);
        const accountId = await newAccount(store, 0);
        t.same(await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId)), { outcome: 'acquired' });
        t.same(await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2' })), {
          outcome: 'in_progress',
        });
        t.same(
          await store.idempotencyKeys.claimIdempotencyKey(
            claimInput(accountId, { leaseToken: 'token-3', fingerprint: 'fp-2' }),
          ),
          {
            outcome: 'fingerprint_mismatch',
          },
        );
      },
    );

    t.test('concurrent claims: exactly one acquires', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const claims = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { leaseToken: `t${i}` })),
        ),
      );
      t.equal(claims.filter((c) => c.outcome === 'acquired').length, 1);
      t.equal(claims.filter((c) => c.outcome === 'in_progress').length, 19);
    });

    t.test('a completed key replays the stored response byte for byte', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId));
      t.equal(
        await store.idempotencyKeys.completeIdempotencyKey({
          accountId,
          key: 'key-1',
          leaseToken: 'token-1',
          response,
        }),
        true,
      );
      const replay = await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'token-2' }));
      t.equal(replay.outcome, 'replay');
      if (replay.outcome === 'replay') {
        t.equal(replay.response.statusCode, 202);
        t.same(replay.response.headers, response.headers);
        t.ok(replay.response.body.equals(response.body));
      }
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { fingerprint: 'fp-2' })),
        { outcome: 'fingerprint_mismatch' },
        'a completed key is bound to its body',
      );
    });

    t.test('keys are scoped to the account', async (t) => {
      const store = await open(t);
      const a = await newAccount(store, 0);
      const b = await newAccount(store, 0);
      t.same(await store.idempotencyKeys.claimIdempotencyKey(claimInput(a)), { outcome: 'acquired' });
      t.same(await store.idempotencyKeys.claimIdempotencyKey(claimInput(b, { fingerprint: 'other' })), {
        outcome: 'acquired',
      });
    });

    t.test("a held key's lease is renewed by its holder only; a lost or completed key is not", async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const now = new Date();
      const claim = {
        accountId,
        key: 'renew',
        fingerprint: 'fp',
        leaseToken: 'holder',
        now,
        leaseMs: 1000,
        ttlMs: 24 * HOUR,
      };
      t.same(await store.idempotencyKeys.claimIdempotencyKey(claim), { outcome: 'acquired' });
      const later = new Date(now.getTime() + 900);
      const renewal = {
        accountId,
        key: 'renew',
        leaseToken: 'holder',
        leaseExpiresAt: new Date(later.getTime() + 1000),
      };
      t.equal(await store.idempotencyKeys.renewIdempotencyKey(renewal), true, 'renewed by its holder');
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey({
          ...claim,
          leaseToken: 'other',
          now: new Date(now.getTime() + 1500),
        }),
        { outcome: 'in_progress' },
        'still held past the first lease',
      );
      t.equal(
        await store.idempotencyKeys.renewIdempotencyKey({ ...renewal, leaseToken: 'other' }),
        false,
        'not by another token',
      );
      await store.idempotencyKeys.releaseIdempotencyKey({ accountId, key: 'renew', leaseToken: 'holder' });
      t.equal(await store.idempotencyKeys.renewIdempotencyKey(renewal), false, 'not once released');
    });

    t.test('a released key can be claimed again, with any body', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId));
      await store.idempotencyKeys.releaseIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1' });
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { leaseToken: 'token-2', fingerprint: 'fp-2' }),
        ),
        {
          outcome: 'acquired',
        },
      );
    });

    t.test('an abandoned in-flight key is taken over after its lease, and the old holder is fenced out', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { now: new Date(start) }));
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { leaseToken: 'token-2', now: new Date(start + 59_999) }),
        ),
        { outcome: 'in_progress' },
        'lease still live',
      );
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { leaseToken: 'token-2', now: new Date(start + 60_000) }),
        ),
        { outcome: 'acquired' },
        'taken over',
      );

      t.equal(
        await store.idempotencyKeys.completeIdempotencyKey({
          accountId,
          key: 'key-1',
          leaseToken: 'token-1',
          response,
        }),
        false,
        'the old holder cannot complete',
      );
      await store.idempotencyKeys.releaseIdempotencyKey({ accountId, key: 'key-1', leaseToken: 'token-1' });
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { leaseToken: 'token-3', now: new Date(start + 60_001) }),
        ),
        { outcome: 'in_progress' },
        'nor release the new holder',
      );
      t.equal(
        await store.idempotencyKeys.completeIdempotencyKey({
          accountId,
          key: 'key-1',
          leaseToken: 'token-2',
          response,
        }),
        true,
        'the new holder completes',
      );
    });

    t.test('an abandoned key with another body stays bound to its first body', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { now: new Date(start) }));
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { fingerprint: 'fp-2', now: new Date(start + 120_000) }),
        ),
        { outcome: 'fingerprint_mismatch' },
      );
    });

    t.test('after 24 h a key starts afresh, and the sweeper deletes only expired keys', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { key: 'old', now: new Date(start) }));
      await store.idempotencyKeys.completeIdempotencyKey({ accountId, key: 'old', leaseToken: 'token-1', response });
      await store.idempotencyKeys.claimIdempotencyKey(
        claimInput(accountId, { key: 'abandoned', now: new Date(start) }),
      );
      await store.idempotencyKeys.claimIdempotencyKey(
        claimInput(accountId, { key: 'recent', now: new Date(start + 23 * HOUR) }),
      );

      const later = new Date(start + 24 * HOUR);
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: 'old', fingerprint: 'fp-new', leaseToken: 'token-9', now: later }),
        ),
        { outcome: 'acquired' },
        'an expired, unswept key is reusable',
      );
      t.equal(
        await store.idempotencyKeys.deleteExpiredIdempotencyKeys(later, 100),
        1,
        'only the abandoned row had expired (old was renewed)',
      );
      t.equal(
        await store.idempotencyKeys.deleteExpiredIdempotencyKeys(later, 100),
        0,
        'sweeping twice deletes nothing more',
      );
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: 'recent', fingerprint: 'fp-x', now: later }),
        ),
        { outcome: 'fingerprint_mismatch' },
        'unexpired keys stay',
      );
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: 'abandoned', fingerprint: 'fp-x', now: later }),
        ),
        { outcome: 'acquired' },
        'the swept key is free',
      );
      t.equal(
        await store.idempotencyKeys.deleteExpiredIdempotencyKeys(new Date(start + 49 * HOUR), 100),
        3,
        'everything expires',
      );
    });

    t.test('the sweeper deletes at most its limit per call, the keys that expired first', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      const start = Date.now();
      for (let i = 0; i < 5; i++)
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: `k${i}`, now: new Date(start + i * 1000) }),
        );
      const later = new Date(start + 25 * HOUR);
      t.equal(await store.idempotencyKeys.deleteExpiredIdempotencyKeys(later, 2), 2, 'two of five');
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: 'k2', fingerprint: 'fp-x', now: new Date(start + 3000) }),
        ),
        { outcome: 'fingerprint_mismatch' },
        'k2 (third to expire) is still there',
      );
      t.same(
        await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { key: 'k1', fingerprint: 'fp-x', now: later }),
        ),
        { outcome: 'acquired' },
        'k1 (second to expire) is gone: claiming it starts afresh',
      );
      t.equal(await store.idempotencyKeys.deleteExpiredIdempotencyKeys(later, 2), 2);
      t.equal(
        await store.idempotencyKeys.deleteExpiredIdempotencyKeys(later, 2),
        1,
        'the last one; fewer than the limit: done',
      );
    });

    t.test(
      'the key is completed in the transaction that charges: a crash right after the insert still replays',
      async (t) => {
        const store = await open(t);
        const accountId = await newAccount(store, 100);
        const now = new Date();
        t.equal((await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { now }))).outcome, 'acquired');
        const task = newTask(accountId, { createdAt: now });
        const taskResponse = {
          statusCode: 202,
          headers: { location: `/x/${task.id}` },
          body: Buffer.from(`{"task":"${task.id}"}`),
        };
        await store.tasks.insertTaskWithDebit(
          task,
          { maxActiveTasks: 10 },
          { accountId, key: 'key-1', leaseToken: 'token-1', response: taskResponse },
        );
        const retry = await store.idempotencyKeys.claimIdempotencyKey(
          claimInput(accountId, { leaseToken: 'token-2', now: new Date(now.getTime() + 120_000) }),
        );
        t.equal(retry.outcome, 'replay');
        if (retry.outcome === 'replay') t.equal(retry.response.body.toString(), `{"task":"${task.id}"}`);
        t.equal((await store.accounts.ledgerTotals(accountId)).debit, 25, 'charged once');
        await assertLedgerInvariant(t, store, accountId);
      },
    );

    t.test('a create whose key lease was taken over creates nothing and is told the key is in progress', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 100);
      const start = new Date();
      await store.idempotencyKeys.claimIdempotencyKey(claimInput(accountId, { leaseToken: 'slow', now: start }));
      t.equal(
        (
          await store.idempotencyKeys.claimIdempotencyKey(
            claimInput(accountId, { leaseToken: 'new', now: new Date(start.getTime() + 61_000) }),
          )
        ).outcome,
        'acquired',
      );
      const task = newTask(accountId, { createdAt: start });
      await t.rejects(
        store.tasks.insertTaskWithDebit(
          task,
          { maxActiveTasks: 10 },
          { accountId, key: 'key-1', leaseToken: 'slow', response },
        ),
        { code: 'idempotency_in_progress' },
      );
      t.equal(await store.tasks.getTask(accountId, task.id), null, 'no task');
      t.equal((await store.accounts.ledgerTotals(accountId)).debit, 0, 'no charge');
      await assertLedgerInvariant(t, store, accountId);
    });
  });

  t.test(
    'a task keeps its seed: 0, the largest, none; alone, in a group and when claimed',
    { jobs: CONTRACT_JOBS },
    async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 1000);
      const withSeed = (seed: number | null) => {
        const task = newTask(accountId);
        return { ...task, parameters: { ...task.parameters, seed } };
      };
      const [zero, largest, none] = [withSeed(0), withSeed(SEED_MAX), withSeed(null)];
      await store.tasks.insertTaskWithDebit(zero, { maxActiveTasks: 10 });
      await store.tasks.insertTasksWithDebits([largest, none], { maxActiveTasks: 10 });
      for (const task of [zero, largest, none])
        t.equal((await store.tasks.getTask(accountId, task.id))?.parameters.seed, task.parameters.seed);
      const listed = await store.tasks.listTasks(accountId, { limit: 10 });
      t.same(listed.items.map((task) => task.parameters.seed).sort(), [0, SEED_MAX, null].sort());
      const claimed = await claimNextTask(store.tasks, policy());
      t.ok(claimed && [0, SEED_MAX, null].includes(claimed.parameters.seed), 'a claim reads the seed');
    },
  );

  t.test('task states for waiters', { jobs: CONTRACT_JOBS }, async (t) => {
    t.test("each existing task's status and attempt, any account's; unknown ids left out", async (t) => {
      const store = await open(t);
      const one = await newAccount(store, 10_000, 'one');
      const other = await newAccount(store, 10_000, 'other');
      const [first, second, third] = [newTask(one), newTask(one), newTask(other)];
      for (const task of [first, second, third]) await store.tasks.insertTaskWithDebit(task, LIMITS);
      const claimed = await claimNextTask(store.tasks, policy());
      t.equal(claimed?.id, first.id);
      await store.tasks.cancelTask(other, third.id, new Date());
      const states = await store.tasks.getTaskStates([third.id, 'no-such-task', first.id, second.id]);
      t.strictSame(
        [...states].sort((a, b) => a.id.localeCompare(b.id)),
        [
          { id: first.id, status: 'IN_PROGRESS', attempt: 1 },
          { id: second.id, status: 'CREATED', attempt: 0 },
          { id: third.id, status: 'CANCELED', attempt: 0 },
        ].sort((a, b) => a.id.localeCompare(b.id)),
      );
      t.strictSame(await store.tasks.getTaskStates([]), []);
    });

    t.test('thousands of ids in one call', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const task = newTask(accountId);
      await store.tasks.insertTaskWithDebit(task, LIMITS);
      const ids = Array.from({ length: 5_000 }, (_, i) => `unknown-${i}`);
      ids.splice(2_500, 0, task.id);
      t.strictSame(await store.tasks.getTaskStates(ids), [{ id: task.id, status: 'CREATED', attempt: 0 }]);
    });
  });

  t.test('task listing', { jobs: CONTRACT_JOBS }, async (t) => {
    const MODELS = MIXED_MODELS;
    const START = MIX_START;
    const storeWith = async (t: Test, tasksOf: (accountId: string) => TaskRecord[]) => {
      const store = await open(t);
      const listed = await newAccount(store, 1_000_000, 'listed');
      const other = await newAccount(store, 1_000_000, 'other');
      const tasks = tasksOf(listed);
      for (const task of [...tasks, ...mixedTasks(other, 60, 7)])
        await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 1_000_000 });
      return { store, accountId: listed, tasks };
    };
    t.test('every filter pages through exactly its tasks, newest first', async (t) => {
      const { store, accountId, tasks } = await storeWith(t, (id) => mixedTasks(id, 150, 42));
      const windowStart = new Date(START + 10_000);
      const windowEnd = new Date(START + 40_000);
      const filters: { name: string; query: Partial<TaskListQuery>; matches: (task: TaskRecord) => boolean }[] = [
        { name: 'no filter', query: {}, matches: () => true },
        ...TASK_STATUSES.map((status) => ({
          name: `status ${status}`,
          query: { status },
          matches: (task: TaskRecord) => task.status === status,
        })),
        ...MODELS.map((model) => ({
          name: `model ${model}`,
          query: { model },
          matches: (task: TaskRecord) => task.model === model,
        })),
        {
          name: 'status and model',
          query: { status: 'COMPLETED', model: 'beta-v5-pro' },
          matches: (task) => task.status === 'COMPLETED' && task.model === 'beta-v5-pro',
        },
        {
          name: 'a time window',
          query: { createdAfter: windowStart, createdBefore: windowEnd },
          matches: (task) => task.createdAt > windowStart && task.createdAt < windowEnd,
        },
        {
          name: 'a time window and a status',
          query: { createdAfter: windowStart, createdBefore: windowEnd, status: 'FAILED' },
          matches: (task) => task.createdAt > windowStart && task.createdAt < windowEnd && task.status === 'FAILED',
        },
      ];
      for (const filter of filters) {
        const expected = newestFirst(tasks.filter(filter.matches));
        t.ok(expected.length > 0, `${filter.name}: the mix has tasks to list`);
        for (const limit of [1, 7, 200]) {
          const pages = await allPages(t, store, accountId, { ...filter.query, limit });
          t.strictSame(pages.flat(), expected, `${filter.name}, pages of ${limit}`);
          t.equal(
            pages.length,
            Math.max(1, Math.ceil(expected.length / limit)),
            `${filter.name}, pages of ${limit}: no empty last page`,
          );
        }
      }
    });

    t.test('a page holds whole tasks, equal to reading each one', async (t) => {
      const { store, accountId } = await storeWith(t, (id) => mixedTasks(id, 30, 3));
      const page = await store.tasks.listTasks(accountId, { limit: 10 });
      t.equal(page.items.length, 10);
      for (const task of page.items) t.strictSame(task, await store.tasks.getTask(accountId, task.id));
    });

    t.test('an account without tasks, or without tasks of the model asked for, lists nothing', async (t) => {
      const { store, accountId } = await storeWith(t, (id) =>
        mixedTasks(id, 20, 5).filter((task) => task.model !== 'beta-v5-pro'),
      );
      t.strictSame(await store.tasks.listTasks(accountId, { limit: 10, model: 'beta-v5-pro' }), {
        items: [],
        nextCursor: null,
      });
      const empty = await newAccount(store, 0);
      t.strictSame(await store.tasks.listTasks(empty, { limit: 10 }), { items: [], nextCursor: null });
    });

    t.test('a page size that is not an integer from 1 to 1000 is refused', async (t) => {
      const { store, accountId } = await storeWith(t, (id) => mixedTasks(id, 5, 1));
      for (const limit of [0, -1, 1.5, 1001, Number.NaN])
        await t.rejects(store.tasks.listTasks(accountId, { limit }), RangeError, `limit ${limit}`);
    });

    t.test('a cursor that is not one the store returned is invalid_request', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 0);
      await t.rejects(
        store.tasks.listTasks(accountId, { limit: 10, cursor: Buffer.from("x' OR 1=1").toString('base64url') }),
        { code: 'invalid_request' },
      );
    });

    t.test('a task round-trips every field, whatever its text holds', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 1000);
      const now = new Date();
      const references = [(await storeUpload(store, accountId, now)).id, (await storeUpload(store, accountId, now)).id];
      const task = createTask(
        {
          model: 'alpha-pro',
          prompt: 'a "lighthouse" at dawn \\ \n\t\u0001 ﬁ 灯台 🌅 \u2028 end',
          image_reference: references,
          parameters: { aspect_ratio: '21:9', resolution: '4K' },
          webhook_url: 'https://example.com/hook?a="b"&c=\\d',
        },
        { accountId, now, newId: () => newIdAt(now) },
      );
      await store.tasks.insertTaskWithDebit(task, LIMITS);
      t.strictSame(await store.tasks.getTask(accountId, task.id), task, 'as created');
      const claimed = await claimNextTask(store.tasks, policy(now));
      t.strictSame(claimed, { ...task, status: 'IN_PROGRESS', attempt: 1, startedAt: now }, 'as claimed');
      const error = { code: 'content_rejected', message: 'no: "quoted" \\ 🌅' };
      t.ok(await store.tasks.failTask({ taskId: task.id, attempt: 1, error, now }));
      const failed = { ...task, status: 'FAILED' as const, attempt: 1, startedAt: now, completedAt: now, error };
      t.strictSame(await store.tasks.getTask(accountId, task.id), failed, 'getTask');
      t.strictSame(await store.tasks.getTaskById(task.id), failed, 'getTaskById');
      t.strictSame((await store.tasks.listTasks(accountId, { limit: 10 })).items, [failed], 'listTasks');
      t.equal(
        await store.tasks.getTask(await newAccount(store, 0), task.id),
        null,
        "another account's task is not found",
      );
    });
  });

  t.test('claims, leases and fencing', { jobs: CONTRACT_JOBS }, async (t) => {
    const queued = async (t: Test, n = 1, over: Parameters<typeof newTask>[1] = {}) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const tasks: TaskRecord[] = [];
      for (let i = 0; i < n; i++) {
        const task = newTask(accountId, over);
        await store.tasks.insertTaskWithDebit(task, LIMITS);
        tasks.push(task);
      }
      return { store, accountId, tasks };
    };

    t.test('the oldest runnable task is claimed: IN_PROGRESS, attempt 1, started', async (t) => {
      const { store, tasks } = await queued(t, 2);
      const now = new Date();
      const claimed = await claimNextTask(store.tasks, policy(now));
      t.match(claimed, { id: tasks[0].id, status: 'IN_PROGRESS', attempt: 1 });
      t.equal(claimed?.startedAt?.getTime(), now.getTime());
      t.equal((await claimNextTask(store.tasks, policy()))?.id, tasks[1].id);
      t.equal(await claimNextTask(store.tasks, policy()), null, 'nothing left');
    });

    t.test('20 concurrent claims of 10 tasks take each task exactly once', async (t) => {
      const { store, tasks } = await queued(t, 10);
      const claims = await Promise.all(Array.from({ length: 20 }, () => claimNextTask(store.tasks, policy())));
      const ids = claims.filter((c) => c !== null).map((c) => c!.id);
      t.equal(ids.length, 10);
      t.strictSame([...ids].sort(), tasks.map((task) => task.id).sort());
    });

    t.test('a requeued task runs again only from its runAfter, and keeps its attempt count', async (t) => {
      const { store, tasks } = await queued(t);
      const now = Date.now();
      await claimNextTask(store.tasks, policy(new Date(now)));
      t.ok(
        await store.tasks.requeueTask({
          taskId: tasks[0].id,
          attempt: 1,
          runAfter: new Date(now + 5000),
          now: new Date(now),
        }),
      );
      t.notOk(
        await store.tasks.requeueTask({ taskId: tasks[0].id, attempt: 1, runAfter: new Date(now), now: new Date(now) }),
        'a second requeue of the attempt is fenced out',
      );
      t.match(await store.tasks.getTaskById(tasks[0].id), { status: 'CREATED', attempt: 1 });
      t.equal(await claimNextTask(store.tasks, policy(new Date(now + 4999))), null, 'not before runAfter');
      t.match(await claimNextTask(store.tasks, policy(new Date(now + 5000))), { id: tasks[0].id, attempt: 2 });
    });

    t.test('renewLease holds the task; a stale attempt cannot renew, complete, fail or requeue', async (t) => {
      const { store, tasks } = await queued(t);
      const start = Date.now();
      const first = await claimNextTask(store.tasks, policy(new Date(start), { leaseMs: 1000 }));
      t.ok(await store.tasks.renewLease(tasks[0].id, 1, new Date(start + 900), 1000), 'renewed until start + 1900');
      t.equal(
        await claimNextTask(store.tasks, policy(new Date(start + 1800), { leaseMs: 1000 })),
        null,
        'the renewed lease is still live',
      );
      const second = await claimNextTask(store.tasks, policy(new Date(start + 2000), { leaseMs: 1000 }));
      t.match(second, { id: first!.id, attempt: 2 }, 'the lost lease was requeued and claimed again');
      const now = new Date(start + 2001);
      t.notOk(await store.tasks.renewLease(tasks[0].id, 1, now, 1000), 'renew');
      t.notOk(await store.tasks.completeTask({ taskId: tasks[0].id, attempt: 1, media: [], now }), 'complete');
      t.notOk(
        await store.tasks.failTask({ taskId: tasks[0].id, attempt: 1, error: { code: 'x', message: 'x' }, now }),
        'fail',
      );
      t.notOk(await store.tasks.requeueTask({ taskId: tasks[0].id, attempt: 1, runAfter: now, now }), 'requeue');
      t.match(await store.tasks.getTaskById(tasks[0].id), { status: 'IN_PROGRESS', attempt: 2 });
      t.ok(await store.tasks.completeTask({ taskId: tasks[0].id, attempt: 2, media: [], now }), 'the owner completes');
    });

    t.test('a lease lost on the last attempt fails the task with worker_lost and refunds it', async (t) => {
      const { store, accountId, tasks } = await queued(t);
      const start = Date.now();
      await claimNextTask(store.tasks, policy(new Date(start), { leaseMs: 1000, maxAttempts: 1 }));
      t.equal(
        await claimNextTask(store.tasks, policy(new Date(start + 1001), { leaseMs: 1000, maxAttempts: 1 })),
        null,
      );
      t.match(await store.tasks.getTaskById(tasks[0].id), { status: 'FAILED', error: { code: 'worker_lost' } });
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 10_000, debit: 25, refund: 25 });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('a task past its deadline fails with deadline_exceeded instead of running, refunded', async (t) => {
      const { store, accountId, tasks } = await queued(t, 1, { createdAt: new Date(Date.now() - 2 * HOUR) });
      t.equal(await claimNextTask(store.tasks, policy()), null);
      t.match(await store.tasks.getTaskById(tasks[0].id), {
        status: 'FAILED',
        error: { code: 'deadline_exceeded' },
        attempt: 0,
      });
      t.equal((await store.accounts.getAccount(accountId))!.balance, 10_000);
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('a running task canceled by its account: refunded once, and the worker is fenced out', async (t) => {
      const { store, accountId, tasks } = await queued(t);
      const claimed = await claimNextTask(store.tasks, policy());
      const canceled = await store.tasks.cancelTask(accountId, tasks[0].id, new Date());
      t.match(canceled, { id: tasks[0].id, status: 'CANCELED', attempt: 1 });
      t.ok(canceled.completedAt);
      t.notOk(
        await store.tasks.renewLease(tasks[0].id, claimed!.attempt, new Date(), 1000),
        'the worker hears at its next heartbeat',
      );
      t.notOk(
        await store.tasks.completeTask({ taskId: tasks[0].id, attempt: claimed!.attempt, media: [], now: new Date() }),
      );
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 10_000, debit: 25, refund: 25 });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test('two concurrent cancels: one cancels, the other is invalid_state, one refund', async (t) => {
      const { store, accountId, tasks } = await queued(t);
      const results = await Promise.allSettled([
        store.tasks.cancelTask(accountId, tasks[0].id, new Date()),
        store.tasks.cancelTask(accountId, tasks[0].id, new Date()),
      ]);
      t.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
      t.match(
        results.find((r) => r.status === 'rejected'),
        { reason: { code: 'invalid_state' } },
      );
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 10_000, debit: 25, refund: 25 });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test(
      "cancel of another account's or an unknown task is not_found; of a terminal one invalid_state",
      async (t) => {
        const { store, accountId, tasks } = await queued(t);
        const other = await newAccount(store, 0);
        await t.rejects(store.tasks.cancelTask(other, tasks[0].id, new Date()), { code: 'not_found' });
        await t.rejects(store.tasks.cancelTask(accountId, newIdAt(new Date()), new Date()), { code: 'not_found' });
        const claimed = await claimNextTask(store.tasks, policy());
        await store.tasks.completeTask({ taskId: claimed!.id, attempt: 1, media: [], now: new Date() });
        await t.rejects(store.tasks.cancelTask(accountId, tasks[0].id, new Date()), { code: 'invalid_state' });
        t.same(
          await store.accounts.ledgerTotals(accountId),
          { grant: 10_000, debit: 25, refund: 0 },
          'a completed task keeps its charge',
        );
      },
    );

    t.test('accounts are served in turn: the fewest tasks in progress first, then the oldest task', async (t) => {
      const { store, tasks: burstTasks } = await queued(t, 4);
      const small = await newAccount(store, 1000, 'small');
      const smallTasks = [newTask(small), newTask(small)];
      for (const task of smallTasks) await store.tasks.insertTaskWithDebit(task, LIMITS);
      const order: string[] = [];
      for (let i = 0; i < 5; i++) order.push((await claimNextTask(store.tasks, policy()))!.id);
      t.strictSame(order, [
        burstTasks[0].id, // both idle: the oldest task
        smallTasks[0].id, // the burst account has one in progress
        burstTasks[1].id, // one each: the oldest
        smallTasks[1].id,
        burstTasks[2].id,
      ]);
      await store.tasks.completeTask({ taskId: burstTasks[0].id, attempt: 1, media: [], now: new Date() });
      t.equal(
        (await claimNextTask(store.tasks, policy()))!.id,
        burstTasks[3].id,
        'only the burst account has work left',
      );
    });

    t.test('a claim of several takes what as many claims one after another would, in turn', async (t) => {
      const { store, tasks: burstTasks } = await queued(t, 4);
      const small = await newAccount(store, 1000, 'small');
      const smallTasks = [newTask(small), newTask(small)];
      for (const task of smallTasks) await store.tasks.insertTaskWithDebit(task, LIMITS);
      const now = new Date();
      const claimed = await store.tasks.claimTasks(policy(now), 5);
      t.strictSame(
        claimed.map((task) => task.id),
        [burstTasks[0].id, smallTasks[0].id, burstTasks[1].id, smallTasks[1].id, burstTasks[2].id],
        'the order of the one-by-one claims above',
      );
      t.ok(
        claimed.every(
          (task) => task.status === 'IN_PROGRESS' && task.attempt === 1 && task.startedAt?.getTime() === now.getTime(),
        ),
        'each claimed: IN_PROGRESS, attempt 1, started',
      );
      t.strictSame(
        (await store.tasks.claimTasks(policy(), 5)).map((task) => task.id),
        [burstTasks[3].id],
        'fewer when fewer are runnable',
      );
      t.strictSame(await store.tasks.claimTasks(policy(), 5), [], 'none left');
    });

    t.test('concurrent claims of several take each task exactly once', async (t) => {
      const { store, tasks } = await queued(t, 10);
      const claims = await Promise.all(Array.from({ length: 5 }, () => store.tasks.claimTasks(policy(), 4)));
      const ids = claims.flat().map((task) => task.id);
      t.equal(ids.length, 10, 'every task claimed once (5 claims of up to 4)');
      t.strictSame([...ids].sort(), tasks.map((task) => task.id).sort());
    });

    t.test('a claim of several fails the tasks past their deadline on the way and claims the rest', async (t) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const stale = newTask(accountId, { createdAt: new Date(Date.now() - 2 * HOUR) });
      const fresh = [newTask(accountId), newTask(accountId)];
      for (const task of [stale, ...fresh]) await store.tasks.insertTaskWithDebit(task, LIMITS);
      t.strictSame(
        (await store.tasks.claimTasks(policy(), 3)).map((task) => task.id),
        fresh.map((task) => task.id),
      );
      t.match(await store.tasks.getTaskById(stale.id), { status: 'FAILED', error: { code: 'deadline_exceeded' } });
      await assertLedgerInvariant(t, store, accountId);
    });

    t.test("a claim of several under a backend's shared limit takes only the room the limit leaves", async (t) => {
      const { store } = await queued(t, 5);
      const settings = { initial: 3, max: 8 };
      const limited = policy(new Date(), { models: ['alpha-pro'], sharedLimit: { backend: 'gemini', settings } });
      t.equal((await store.tasks.claimTasks(limited, 5)).length, 3, 'three calls in flight of three');
      t.strictSame(await store.tasks.claimTasks(limited, 5), [], 'the limit is full');
    });

    t.test('a claim limited to some models takes only their tasks', async (t) => {
      const { store, accountId, tasks } = await queued(t, 1);
      const now = new Date();
      const beta = createTask({ model: 'beta-v5-pro', prompt: 'a lighthouse' } as never, {
        accountId,
        now,
        newId: () => newIdAt(now),
      });
      await store.tasks.insertTaskWithDebit(beta, LIMITS);
      t.equal((await claimNextTask(store.tasks, policy(now, { models: ['beta-v5-pro'] })))?.id, beta.id);
      t.equal(await claimNextTask(store.tasks, policy(now, { models: ['beta-v5-pro'] })), null);
      t.equal((await claimNextTask(store.tasks, policy(now, { models: ['alpha-pro'] })))?.id, tasks[0].id);
    });

    t.test("a backend's shared limit bounds its calls in flight, and a refusal lowers it", async (t) => {
      const { store } = await queued(t, 5);
      const settings = { initial: 2, max: 8 };
      const limited = (now: Date) =>
        policy(now, { models: ['alpha-pro'], sharedLimit: { backend: 'gemini', settings } });
      const record = (task: TaskRecord, outcome: UpstreamOutcome, now: number) =>
        store.backendLimits.recordUpstreamCall({
          backend: 'gemini',
          task: { id: task.id, attempt: task.attempt },
          models: ['alpha-pro'],
          outcome,
          now: new Date(now),
          settings,
        });
      const start = Date.now();
      const first = (await claimNextTask(store.tasks, limited(new Date(start))))!;
      const second = (await claimNextTask(store.tasks, limited(new Date(start))))!;
      t.ok(first && second);
      t.equal(
        await claimNextTask(store.tasks, limited(new Date(start))),
        null,
        'two calls in flight: the limit is full',
      );

      // A success while the limit is full and work waits: slow start grows the limit by one, and the
      // call that ended holds no slot while its task stores the result.
      let state = await record(first, { kind: 'ok', durationMs: 400 }, start + 10);
      t.equal(state.limit, 3);
      t.ok(await claimNextTask(store.tasks, limited(new Date(start + 10))));
      t.ok(await claimNextTask(store.tasks, limited(new Date(start + 10))));
      t.equal(await claimNextTask(store.tasks, limited(new Date(start + 10))), null, 'three calls in flight of three');

      state = await record(second, { kind: 'rate_limited', retryAfterMs: 1000 }, start + 30);
      t.match(state, { limit: 2, pausedUntil: start + 1030, slowStart: false });
      t.same((await store.backendLimits.backendLimits()).get('gemini'), state, 'the state is kept for every process');
      t.ok(
        await claimNextTask(store.tasks, policy(new Date(start + 30))),
        'a claim of another backend is not held back',
      );
    });

    t.test('paused: no claim before the pause ends, even with room', async (t) => {
      const { store } = await queued(t, 1);
      const settings = { initial: 4, max: 8 };
      const start = Date.now();
      await store.backendLimits.recordUpstreamCall({
        backend: 'openai',
        task: { id: 'none', attempt: 1 },
        models: ['alpha-pro'],
        outcome: { kind: 'rate_limited', retryAfterMs: 2000 },
        now: new Date(start),
        settings,
      });
      const limited = (now: number) =>
        policy(new Date(now), { models: ['alpha-pro'], sharedLimit: { backend: 'openai', settings } });
      t.equal(await claimNextTask(store.tasks, limited(start + 1999)), null);
      t.ok(await claimNextTask(store.tasks, limited(start + 2000)));
    });

    t.test('an unavailable backend: no claim until its cool-down, then one probe at a time', async (t) => {
      const { store } = await queued(t, 2);
      const settings = { initial: 4, max: 8, unavailableCooldownMs: 5000 };
      const start = Date.now();
      const state = await store.backendLimits.recordUpstreamCall({
        backend: 'openai',
        task: { id: 'none', attempt: 1 },
        models: ['alpha-pro'],
        outcome: { kind: 'unavailable' },
        now: new Date(start),
        settings,
      });
      t.equal(state.unavailableUntil, start + 5000);
      t.same(
        (await store.backendLimits.backendLimits()).get('openai'),
        state,
        'the circuit is shared by every process',
      );
      const limited = (now: number) =>
        policy(new Date(now), { models: ['alpha-pro'], sharedLimit: { backend: 'openai', settings } });
      t.equal(await claimNextTask(store.tasks, limited(start + 4999)), null);
      t.ok(await claimNextTask(store.tasks, limited(start + 5000)), 'the probe');
      t.equal(await claimNextTask(store.tasks, limited(start + 5000)), null, 'one probe at a time');
    });

    t.test('a deferred requeue spends no attempt: a lost lease after it is retried, not failed', async (t) => {
      const { store, tasks } = await queued(t);
      const start = Date.now();
      await claimNextTask(store.tasks, policy(new Date(start), { maxAttempts: 2 }));
      t.ok(
        await store.tasks.requeueTask({
          taskId: tasks[0].id,
          attempt: 1,
          runAfter: new Date(start),
          now: new Date(start),
          deferred: true,
        }),
      );
      t.match(await store.tasks.getTaskById(tasks[0].id), { status: 'CREATED', attempt: 1, deferredAttempts: 1 });
      await claimNextTask(store.tasks, policy(new Date(start), { maxAttempts: 2, leaseMs: 1000 }));
      // Attempt 2's lease is lost: 1 of 2 attempts spent (2 had it not been deferred), so it runs again.
      t.match(await claimNextTask(store.tasks, policy(new Date(start + 1001), { maxAttempts: 2 })), {
        id: tasks[0].id,
        attempt: 3,
        deferredAttempts: 1,
      });
    });

    t.test(
      'failTasksPastDeadline fails and refunds queued tasks past their deadline, whatever their model',
      async (t) => {
        const store = await open(t);
        const accountId = await newAccount(store, 1000);
        const start = Date.now();
        const old = newTask(accountId, { createdAt: new Date(start - HOUR) });
        const recent = newTask(accountId, { createdAt: new Date(start - HOUR + 1) });
        await store.tasks.insertTaskWithDebit(old, LIMITS);
        await store.tasks.insertTaskWithDebit(recent, LIMITS);
        t.strictSame(await store.tasks.failTasksPastDeadline(new Date(start), HOUR), [old.id]);
        t.match(await store.tasks.getTaskById(old.id), { status: 'FAILED', error: { code: 'deadline_exceeded' } });
        t.match(await store.tasks.getTaskById(recent.id), { status: 'CREATED' });
        t.strictSame(await store.tasks.failTasksPastDeadline(new Date(start), HOUR), [], 'once');
        t.equal(
          (await store.accounts.getAccount(accountId))?.balance,
          975,
          'the failed one refunded, the other still debited',
        );
        await assertLedgerInvariant(t, store, accountId);
      },
    );

    t.test('countQueuedTasks counts CREATED tasks per model', async (t) => {
      const { store } = await queued(t, 3);
      await claimNextTask(store.tasks, policy());
      t.same(await store.backendLimits.countQueuedTasks(), new Map([['alpha-pro', 2]]));
    });
  });

  t.test('completion, results and the webhook outbox', { jobs: CONTRACT_JOBS }, async (t) => {
    const running = async (t: Test, webhookUrl?: string) => {
      const store = await open(t);
      const accountId = await newAccount(store, 1000);
      const task = newTask(accountId, { webhookUrl });
      await store.tasks.insertTaskWithDebit(task, LIMITS);
      const claimed = await claimNextTask(store.tasks, policy());
      return { store, accountId, task: claimed! };
    };

    t.test('completion stores the result rows, the generated list and the completed event together', async (t) => {
      const { store, accountId, task } = await running(t, 'https://example.com/hook');
      const now = new Date();
      const media = [await reservedResult(store, now), await reservedResult(store, now)];
      t.ok(await store.tasks.completeTask({ taskId: task.id, attempt: task.attempt, media, now }));
      const done = await store.tasks.getTask(accountId, task.id);
      t.match(done, { status: 'COMPLETED', error: null });
      t.equal(done?.completedAt?.getTime(), now.getTime());
      t.strictSame(
        done?.generated,
        media.map((m) => ({
          media_id: m.id,
          content_type: m.contentType,
          width: m.width,
          height: m.height,
          size_bytes: m.sizeBytes,
        })),
      );
      for (const m of media) {
        t.match(await store.media.getMedia(accountId, m.id, now), {
          id: m.id,
          source: 'generated',
          taskId: task.id,
          blobKey: m.blobKey,
          accountId,
        });
      }
      t.strictSame(
        await store.media.listDueBlobDeletions(new Date(now.getTime() + 120_000), 10),
        [],
        'the reservations were taken back',
      );
      t.strictSame(
        await store.media.mediaBlobKeys(accountId, [media[0].id]),
        new Map([[media[0].id, media[0].blobKey]]),
      );
      const delivery = await store.webhooks.claimDueWebhookDelivery(now, 60_000);
      t.match(delivery, {
        taskId: task.id,
        accountId,
        eventType: 'image.generation.completed',
        url: 'https://example.com/hook',
        status: 'pending',
        attempts: 0,
      });
      t.same(await store.accounts.ledgerTotals(accountId), { grant: 1000, debit: 25, refund: 0 });
    });

    t.test('a result whose blob reservation lapsed completes nothing: no rows, task still running', async (t) => {
      const { store, accountId, task } = await running(t, 'https://example.com/hook');
      const now = new Date();
      const fine = await reservedResult(store, now);
      const lapsed = await reservedResult(store, now);
      await store.media.scheduleBlobDeletion(lapsed.blobKey, now); // due now: the sweeper may delete it
      t.notOk(await store.tasks.completeTask({ taskId: task.id, attempt: task.attempt, media: [fine, lapsed], now }));
      t.match(await store.tasks.getTask(accountId, task.id), { status: 'IN_PROGRESS', generated: [] });
      t.equal(await store.media.getMedia(accountId, fine.id, now), null, 'not even the first row');
      t.equal(await store.webhooks.claimDueWebhookDelivery(now, 60_000), null, 'no event');
    });

    t.test("a stale attempt's completion writes nothing and leaves its blobs reserved, for the sweeper", async (t) => {
      const { store, accountId, task } = await running(t, 'https://example.com/hook');
      const now = new Date();
      const result = await reservedResult(store, now);
      t.notOk(await store.tasks.completeTask({ taskId: task.id, attempt: task.attempt + 1, media: [result], now }));
      t.match(await store.tasks.getTask(accountId, task.id), { status: 'IN_PROGRESS', generated: [] });
      t.equal(await store.media.getMedia(accountId, result.id, now), null, 'no media row');
      t.strictSame(
        await store.media.listDueBlobDeletions(new Date(now.getTime() + 120_000), 10),
        [result.blobKey],
        'the reservation stays, so the orphan blob is swept once it is due',
      );
      t.equal(await store.webhooks.claimDueWebhookDelivery(now, 60_000), null, 'no event');
    });

    t.test(
      'a failure refunds once and enqueues the failed event; a task without webhook_url enqueues nothing',
      async (t) => {
        const { store, accountId, task } = await running(t, 'https://example.com/hook');
        const now = new Date();
        t.ok(
          await store.tasks.failTask({
            taskId: task.id,
            attempt: task.attempt,
            error: { code: 'model_error', message: 'no' },
            now,
          }),
        );
        t.notOk(
          await store.tasks.failTask({
            taskId: task.id,
            attempt: task.attempt,
            error: { code: 'model_error', message: 'no' },
            now,
          }),
          'only once',
        );
        t.same(await store.accounts.ledgerTotals(accountId), { grant: 1000, debit: 25, refund: 25 });
        t.match(await store.webhooks.claimDueWebhookDelivery(now, 60_000), { eventType: 'image.generation.failed' });
        t.equal(await store.webhooks.claimDueWebhookDelivery(now, 60_000), null, 'one event, leased');

        const quiet = newTask(accountId);
        await store.tasks.insertTaskWithDebit(quiet, LIMITS);
        await store.tasks.cancelTask(accountId, quiet.id, now);
        t.equal(
          (await store.webhooks.claimDueWebhookDelivery(new Date(now.getTime() + 120_000), 60_000)) !== null,
          true,
          'the leased one is due again',
        );
        t.equal(
          await store.webhooks.claimDueWebhookDelivery(new Date(now.getTime() + 120_000), 60_000),
          null,
          'and nothing for the task without a URL',
        );
        await assertLedgerInvariant(t, store, accountId);
      },
    );

    t.test('a cancel enqueues the canceled event', async (t) => {
      const { store, accountId, task } = await running(t, 'https://example.com/hook');
      await store.tasks.cancelTask(accountId, task.id, new Date());
      t.match(await store.webhooks.claimDueWebhookDelivery(new Date(), 60_000), {
        eventType: 'image.generation.canceled',
        taskId: task.id,
      });
    });
  });

  t.test('webhook deliveries and secrets', { jobs: CONTRACT_JOBS }, async (t) => {
    const withDeliveries = async (t: Test, n: number) => {
      const store = await open(t);
      const accountId = await newAccount(store, 10_000);
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const task = newTask(accountId, { webhookUrl: `https://example.com/${i}` });
        await store.tasks.insertTaskWithDebit(task, LIMITS);
        await store.tasks.cancelTask(accountId, task.id, new Date());
        ids.push(task.id);
      }
      return { store, accountId, taskIds: ids };
    };

    t.test(
      'the first secret is made once, even by concurrent first calls; rotation keeps the old one for its grace',
      async (t) => {
        const store = await open(t);
        const accountId = await newAccount(store, 0);
        const now = new Date();
        let n = 0;
        const first = await Promise.all(
          Array.from({ length: 5 }, () => store.webhooks.webhookSecrets(accountId, now, () => `whsec_${++n}`)),
        );
        t.equal(new Set(first.map((s) => s.current)).size, 1, 'one current secret');
        t.match(first[0], { previous: null, previousExpiresAt: null });
        const rotated = await store.webhooks.rotateWebhookSecret(accountId, now, 60_000, () => 'whsec_new');
        t.match(rotated, { current: 'whsec_new', previous: first[0].current });
        t.equal(rotated.previousExpiresAt?.getTime(), now.getTime() + 60_000);
        t.match(
          await store.webhooks.webhookSecrets(accountId, new Date(now.getTime() + 60_000), () => 'unused'),
          { current: 'whsec_new', previous: null },
          'the grace is over',
        );
      },
    );

    t.test('a claimed delivery is leased; an attempt records its outcome and log', async (t) => {
      const { store, accountId } = await withDeliveries(t, 1);
      const now = Date.now();
      const delivery = await store.webhooks.claimDueWebhookDelivery(new Date(now), 10_000);
      t.ok(delivery);
      t.equal(await store.webhooks.claimDueWebhookDelivery(new Date(now + 9_999), 10_000), null, 'leased');
      await store.webhooks.recordWebhookAttempt({
        deliveryId: delivery!.id,
        attempt: { attemptedAt: new Date(now), statusCode: 500, error: null, durationMs: 12 },
        status: 'pending',
        nextAttemptAt: new Date(now + 5000),
        manual: false,
        now: new Date(now),
      });
      t.equal(
        await store.webhooks.claimDueWebhookDelivery(new Date(now + 4999), 10_000),
        null,
        'not before its next attempt',
      );
      const retried = await store.webhooks.claimDueWebhookDelivery(new Date(now + 5000), 10_000);
      t.match(retried, { id: delivery!.id, attempts: 1 });
      await store.webhooks.recordWebhookAttempt({
        deliveryId: delivery!.id,
        attempt: { attemptedAt: new Date(now + 5000), statusCode: 204, error: null, durationMs: 3 },
        status: 'delivered',
        nextAttemptAt: null,
        manual: false,
        now: new Date(now + 5000),
      });
      t.equal(
        await store.webhooks.claimDueWebhookDelivery(new Date(now + 100_000), 10_000),
        null,
        'delivered: never again',
      );
      const [listed] = (await store.webhooks.listWebhookDeliveries(accountId, { limit: 10 })).items;
      t.match(listed, { id: delivery!.id, status: 'delivered', attempts: 2, nextAttemptAt: null });
      t.same(
        listed.attemptLog.map((a) => [a.statusCode, a.durationMs, a.attemptedAt.getTime()]),
        [
          [500, 12, now],
          [204, 3, now + 5000],
        ],
      );
    });

    t.test(
      'a failed manual retry keeps the schedule where it was: its next scheduled attempt is not pushed back',
      async (t) => {
        const { store, accountId } = await withDeliveries(t, 1);
        const now = Date.now();
        const delivery = await store.webhooks.claimDueWebhookDelivery(new Date(now), 10_000);
        const scheduledAt = new Date(now + 5000);
        await store.webhooks.recordWebhookAttempt({
          deliveryId: delivery!.id,
          attempt: { attemptedAt: new Date(now), statusCode: 500, error: null, durationMs: 1 },
          status: 'pending',
          nextAttemptAt: scheduledAt,
          manual: false,
          now: new Date(now),
        });
        const replayed = await store.webhooks.replayWebhookDelivery(
          accountId,
          delivery!.id,
          new Date(now + 1000),
          REPLAY_BUDGET,
        );
        t.match(
          replayed,
          { scheduledAttempts: 1, manualRetry: { resumeAt: scheduledAt } },
          'the scheduled attempt it goes ahead of is kept',
        );
        const manual = await store.webhooks.claimDueWebhookDelivery(new Date(now + 1000), 10_000);
        t.match(manual, { id: delivery!.id, manualRetry: { resumeAt: scheduledAt } });
        await store.webhooks.recordWebhookAttempt({
          deliveryId: delivery!.id,
          attempt: { attemptedAt: new Date(now + 1000), statusCode: 500, error: null, durationMs: 1 },
          status: 'pending',
          nextAttemptAt: manual!.manualRetry!.resumeAt,
          manual: true,
          now: new Date(now + 1000),
        });
        const [listed] = (await store.webhooks.listWebhookDeliveries(accountId, { limit: 1 })).items;
        t.match(
          listed,
          { attempts: 2, scheduledAttempts: 1, manualRetry: null, nextAttemptAt: scheduledAt },
          'a manual attempt is not a step of the schedule',
        );
      },
    );

    t.test(
      'replays: one at a time per delivery, within the per-delivery and per-account budgets of the window',
      async (t) => {
        const { store, accountId } = await withDeliveries(t, 3);
        const budget = { perDelivery: 2, perAccount: 3, windowMs: HOUR };
        const start = Date.now();
        const [first, second] = (await store.webhooks.listWebhookDeliveries(accountId, { limit: 3 })).items;
        // A replay is pending until an attempt is recorded for it.
        const attemptMade = async (id: string, at: number) =>
          store.webhooks.recordWebhookAttempt({
            deliveryId: id,
            attempt: { attemptedAt: new Date(at), statusCode: 500, error: null, durationMs: 1 },
            status: 'failed',
            nextAttemptAt: null,
            manual: true,
            now: new Date(at),
          });
        const refusal = (id: string, at: number) =>
          store.webhooks.replayWebhookDelivery(accountId, id, new Date(at), budget).then(
            () => null,
            (e: { code: string; retryAfterMs: number | null }) => ({ code: e.code, retryAfterMs: e.retryAfterMs }),
          );

        await store.webhooks.replayWebhookDelivery(accountId, first.id, new Date(start), budget);
        t.same(await refusal(first.id, start + 10), { code: 'retry_in_progress', retryAfterMs: null });
        await attemptMade(first.id, start + 20);
        t.equal(await refusal(first.id, start + 30), null, 'the second replay of the window');
        await attemptMade(first.id, start + 40);
        t.same(
          await refusal(first.id, start + 50),
          { code: 'retry_budget_exhausted', retryAfterMs: HOUR - 50 },
          'the delivery spent its budget: the oldest replay leaves the window in an hour',
        );
        t.equal(await refusal(second.id, start + 60), null, 'another delivery has its own budget');
        await attemptMade(second.id, start + 70);
        t.match(
          await refusal(second.id, start + 80),
          { code: 'retry_budget_exhausted' },
          "the account's budget (3) is spent too",
        );
        t.equal(await refusal(first.id, start + HOUR + 1), null, 'an hour later the window has moved on');
      },
    );

    t.test('a delivery keeps its most recent attempts up to the listed bound, and counts them all', async (t) => {
      const { store, accountId } = await withDeliveries(t, 1);
      const [delivery] = (await store.webhooks.listWebhookDeliveries(accountId, { limit: 1 })).items;
      const start = Date.now();
      for (let i = 0; i < 1003; i++)
        await store.webhooks.recordWebhookAttempt({
          deliveryId: delivery.id,
          attempt: { attemptedAt: new Date(start + i), statusCode: 500, error: `attempt ${i}`, durationMs: 1 },
          status: 'pending',
          nextAttemptAt: new Date(start + i + 1),
          manual: false,
          now: new Date(start + i),
        });
      const [listed] = (await store.webhooks.listWebhookDeliveries(accountId, { limit: 1 })).items;
      t.equal(listed.attempts, 1003, 'every attempt counted');
      t.equal(listed.attemptLog.length, 1000, 'the most recent 1000 kept');
      t.equal(listed.attemptLog[0].error, 'attempt 3', 'oldest kept first');
      t.equal(listed.attemptLog[999].error, 'attempt 1002');
    });

    t.test(
      'deliveries are listed newest first, by task and status, page by page; replay makes one due again',
      async (t) => {
        const { store, accountId, taskIds } = await withDeliveries(t, 5);
        const ids: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.webhooks.listWebhookDeliveries(accountId, { limit: 2, cursor });
          ids.push(...page.items.map((d) => d.id));
          cursor = page.nextCursor ?? undefined;
        } while (cursor);
        t.equal(ids.length, 5);
        t.strictSame(ids, [...ids].sort().reverse(), 'newest first');
        t.match((await store.webhooks.listWebhookDeliveries(accountId, { limit: 10, taskId: taskIds[2] })).items, [
          { taskId: taskIds[2] },
        ]);
        t.equal(
          (await store.webhooks.listWebhookDeliveries(accountId, { limit: 10, status: 'delivered' })).items.length,
          0,
        );

        const delivery = await store.webhooks.claimDueWebhookDelivery(new Date(), 60_000);
        await store.webhooks.recordWebhookAttempt({
          deliveryId: delivery!.id,
          attempt: { attemptedAt: new Date(), statusCode: 410, error: null, durationMs: 1 },
          status: 'failed',
          nextAttemptAt: null,
          manual: false,
          now: new Date(),
        });
        const replayed = await store.webhooks.replayWebhookDelivery(accountId, delivery!.id, new Date(), REPLAY_BUDGET);
        t.match(replayed, { id: delivery!.id, status: 'pending', attemptLog: [{ statusCode: 410 }] });
        await t.rejects(
          store.webhooks.replayWebhookDelivery(await newAccount(store, 0), delivery!.id, new Date(), REPLAY_BUDGET),
          { code: 'not_found' },
          "another account's",
        );
      },
    );
  });

  t.test('media and retention', { jobs: CONTRACT_JOBS }, async (t) => {
    const withAccount = async (t: Test) => {
      const store = await open(t);
      return { store, accountId: await newAccount(store, 0) };
    };

    t.test('a media row needs a live blob reservation, which its insert takes back', async (t) => {
      const { store, accountId } = await withAccount(t);
      const now = new Date();
      const upload = await storeUpload(store, accountId, now);
      t.strictSame(await store.media.getMedia(accountId, upload.id, now), upload, 'round-trips');
      t.strictSame(await store.media.getMediaById(upload.id, now), upload);
      t.equal(await store.media.getMedia(await newAccount(store, 0), upload.id, now), null, "not another account's");
      t.strictSame(
        await store.media.listDueBlobDeletions(new Date(now.getTime() + HOUR), 10),
        [],
        'reservation taken back',
      );

      const unreserved = { ...upload, id: newIdAt(now), blobKey: 'uploads/never-reserved' };
      t.equal(await store.media.insertMedia(unreserved, now), false, 'no reservation: no row');
      await store.media.scheduleBlobDeletion('uploads/lapsed', now);
      t.equal(
        await store.media.insertMedia({ ...upload, id: newIdAt(now), blobKey: 'uploads/lapsed' }, now),
        false,
        'a reservation already due: no row',
      );
      t.strictSame(
        await store.media.listDueBlobDeletions(now, 10),
        ['uploads/lapsed'],
        'and the blob stays queued for deletion',
      );
    });

    t.test('a deleted media row queues its blob at once; deleting again finds nothing', async (t) => {
      const { store, accountId } = await withAccount(t);
      const now = new Date();
      const upload = await storeUpload(store, accountId, now);
      t.equal(
        await store.media.deleteMedia(await newAccount(store, 0), upload.id, now),
        null,
        "another account's is not deleted",
      );
      t.equal(await store.media.deleteMedia(accountId, upload.id, now), upload.blobKey);
      t.equal(await store.media.deleteMedia(accountId, upload.id, now), null);
      t.equal(await store.media.getMediaById(upload.id, now), null);
      t.strictSame(await store.media.listDueBlobDeletions(now, 10), [upload.blobKey]);
      await store.media.completeBlobDeletion(upload.blobKey, now);
      t.strictSame(await store.media.listDueBlobDeletions(now, 10), []);
    });

    t.test('expired media are invisible, then swept in slices, oldest first, their blobs queued', async (t) => {
      const { store, accountId } = await withAccount(t);
      const now = Date.now();
      const media = [];
      for (let i = 0; i < 3; i++) media.push(await storeUpload(store, accountId, new Date(now), 1000 + i));
      const fresh = await storeUpload(store, accountId, new Date(now), HOUR);
      const later = new Date(now + 5000);
      t.equal(await store.media.getMedia(accountId, media[0].id, later), null, 'expired: not found before the sweep');
      t.equal(await store.media.getMediaById(media[0].id, later), null);
      t.equal(await store.media.deleteExpiredMedia(later, 2), 2);
      t.equal(await store.media.deleteExpiredMedia(later, 2), 1);
      t.equal(await store.media.deleteExpiredMedia(later, 2), 0);
      t.strictSame((await store.media.listDueBlobDeletions(later, 10)).sort(), media.map((m) => m.blobKey).sort());
      t.ok(await store.media.getMedia(accountId, fresh.id, later), 'unexpired media stay');
      t.strictSame(
        await store.media.listDueBlobDeletions(later, 2),
        await store.media.listDueBlobDeletions(later, 2),
        'listing does not consume',
      );
      t.equal((await store.media.listDueBlobDeletions(later, 2)).length, 2, 'at most the limit');
    });

    t.test('a later schedule replaces an earlier one; completing a deletion before it is due keeps it', async (t) => {
      const { store } = await withAccount(t);
      const now = Date.now();
      await store.media.scheduleBlobDeletion('k', new Date(now + 60_000));
      await store.media.scheduleBlobDeletion('k', new Date(now));
      t.strictSame(await store.media.listDueBlobDeletions(new Date(now), 10), ['k']);
      await store.media.scheduleBlobDeletion('k', new Date(now + 60_000));
      await store.media.completeBlobDeletion('k', new Date(now));
      t.strictSame(
        await store.media.listDueBlobDeletions(new Date(now + 60_000), 10),
        ['k'],
        'a re-reserved blob is not forgotten',
      );
    });
  });

  t.test('OAuth clients, codes and tokens', { jobs: CONTRACT_JOBS }, async (t) => {
    /** An account, one of its keys and a grant through it. */
    async function grantOf(store: Store) {
      const accountId = await newAccount(store, 0);
      const now = new Date();
      const key = await store.accounts.insertApiKey({
        id: newIdAt(now),
        accountId,
        name: 'oauth',
        prefix: `ig_oa${newIdAt(now).slice(-8)}`,
        hash: `oauth-key-${newIdAt(now)}`,
        now,
      });
      return {
        familyId: newIdAt(now),
        clientId: `client-${newIdAt(now)}`,
        accountId,
        keyId: key.id,
        resource: 'https://api.example/mcp',
        scope: 'mcp',
      };
    }
    const tokenPair = (grant: Awaited<ReturnType<typeof grantOf>>, now: Date, tag: string) =>
      (['access', 'refresh'] as const).map((kind) => ({
        ...grant,
        hash: `${kind}-${tag}-${grant.familyId}`,
        kind,
        expiresAt: new Date(now.getTime() + HOUR),
        createdAt: now,
      }));

    t.test('a client is stored with its metadata and found by its id', async (t) => {
      const store = await open(t);
      const now = new Date();
      const client = {
        clientId: newIdAt(now),
        metadata: { client_name: 'Agent', redirect_uris: ['http://127.0.0.1:9/cb'] },
        createdAt: now,
      };
      await store.oauth.insertOAuthClient(client);
      t.strictSame(await store.oauth.findOAuthClient(client.clientId), client);
      t.equal(await store.oauth.findOAuthClient(newIdAt(now)), null);
    });

    t.test('a code is taken once, even by two exchanges at the same time', async (t) => {
      const store = await open(t);
      const now = new Date();
      const grant = await grantOf(store);
      const code = {
        ...grant,
        hash: `code-${grant.familyId}`,
        redirectUri: 'http://127.0.0.1:9/cb',
        codeChallenge: 'c'.repeat(43),
        expiresAt: new Date(now.getTime() + 60_000),
        createdAt: now,
      };
      await store.oauth.insertAuthorizationCode(code);
      const taken = await Promise.all([1, 2, 3].map(() => store.oauth.takeAuthorizationCode(code.hash, now)));
      t.equal(taken.filter((c) => c?.usedAt === null).length, 1, 'one exchange finds it unused');
      t.strictSame(
        taken.find((c) => c?.usedAt === null),
        { ...code, usedAt: null },
      );
      t.equal(taken.filter((c) => c?.usedAt?.getTime() === now.getTime()).length, 2, 'the others find it used');
      t.equal(await store.oauth.takeAuthorizationCode('no-such-code', now), null);
    });

    t.test('a token is found with the key it was issued through, revoked or not', async (t) => {
      const store = await open(t);
      const now = new Date();
      const grant = await grantOf(store);
      const [access, refresh] = tokenPair(grant, now, 'find');
      await store.oauth.insertOAuthTokens([access, refresh]);
      const found = await store.oauth.findOAuthToken(access.hash);
      t.strictSame(found?.token, { ...access, usedAt: null, revokedAt: null });
      t.match(found?.key, { id: grant.keyId, accountId: grant.accountId, revokedAt: null });
      await store.accounts.revokeApiKey(grant.keyId, now);
      t.ok((await store.oauth.findOAuthToken(refresh.hash))?.key.revokedAt, 'the key’s revocation is seen');
      t.equal(await store.oauth.findOAuthToken('no-such-token'), null);
    });

    t.test('a refresh token rotates once, even when two refreshes race', async (t) => {
      const store = await open(t);
      const now = new Date();
      const grant = await grantOf(store);
      const [access, refresh] = tokenPair(grant, now, 'first');
      await store.oauth.insertOAuthTokens([access, refresh]);
      const rotations = await Promise.all(
        [1, 2, 3].map((i) => store.oauth.rotateRefreshToken(refresh.hash, now, tokenPair(grant, now, `next${i}`))),
      );
      t.strictSame(rotations.filter(Boolean).length, 1, 'one rotation wins');
      const winner = rotations.findIndex(Boolean) + 1;
      t.ok(await store.oauth.findOAuthToken(`access-next${winner}-${grant.familyId}`), 'its successors stored');
      for (const i of [1, 2, 3].filter((i) => i !== winner))
        t.equal(await store.oauth.findOAuthToken(`access-next${i}-${grant.familyId}`), null, 'the losers’ not');
      t.equal((await store.oauth.findOAuthToken(refresh.hash))?.token.usedAt?.getTime(), now.getTime());
      t.equal(await store.oauth.rotateRefreshToken(access.hash, now, []), false, 'an access token does not rotate');
    });

    t.test('revoking a family revokes all its tokens and no other', async (t) => {
      const store = await open(t);
      const now = new Date();
      const grant = await grantOf(store);
      const other = { ...grant, familyId: newIdAt(now) };
      await store.oauth.insertOAuthTokens([...tokenPair(grant, now, 'a'), ...tokenPair(other, now, 'b')]);
      await store.oauth.revokeOAuthFamily(grant.familyId, now);
      for (const kind of ['access', 'refresh'])
        t.equal(
          (await store.oauth.findOAuthToken(`${kind}-a-${grant.familyId}`))?.token.revokedAt?.getTime(),
          now.getTime(),
        );
      t.equal((await store.oauth.findOAuthToken(`access-b-${other.familyId}`))?.token.revokedAt, null);
      const [, refresh] = tokenPair(grant, now, 'a');
      t.equal(await store.oauth.rotateRefreshToken(refresh.hash, now, []), false, 'a revoked token does not rotate');
    });
  });

  t.test(
    'operating the business: key budgets and spend, grants, usage, the audit log',
    { jobs: CONTRACT_JOBS },
    async (t) => businessContract(t, adapter),
  );

  t.test('ping answers and migrate is safe to call again', { jobs: CONTRACT_JOBS }, async (t) => {
    const store = await open(t);
    await store.ping();
    await store.migrate();
    t.equal(typeof (await store.accounts.countAccounts()), 'number');
  });
}
