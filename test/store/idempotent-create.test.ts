import t from 'tap';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { newAccountWithTokens, openTestRuntime } from '../helpers/worker.js';

const FINGERPRINT = 'f'.repeat(64);
const response = (taskId: string) => ({ statusCode: 202, headers: { location: `/api/v1/images/generations/${taskId}` }, body: Buffer.from(`{"task":"${taskId}"}`) });

async function claim(store: Awaited<ReturnType<typeof openTestRuntime>>['store'], accountId: string, leaseToken: string, now: Date) {
  return store.claimIdempotencyKey({ accountId, key: 'k-1', fingerprint: FINGERPRINT, leaseToken, now, leaseMs: 60_000, ttlMs: 86_400_000 });
}

t.test('the key is completed in the transaction that charges: a crash right after the insert still replays', async (t) => {
  const { store } = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(store, 100);
  const now = new Date();
  t.equal((await claim(store, accountId, 'lease-a', now)).outcome, 'acquired');
  const task = createTask({ model: 'alpha-pro', prompt: 'a paper boat' }, { accountId, now, newId: () => newIdAt(now) });
  await store.insertTaskWithDebit(task, { maxActiveTasks: 10 }, { accountId, key: 'k-1', leaseToken: 'lease-a', response: response(task.id) });

  // Nothing else runs (the process "died" before its onSend); long after the lease, a retry comes.
  const retry = await claim(store, accountId, 'lease-b', new Date(now.getTime() + 120_000));
  t.equal(retry.outcome, 'replay');
  if (retry.outcome === 'replay') t.equal(retry.response.body.toString(), `{"task":"${task.id}"}`);
  t.equal((await store.ledgerTotals(accountId)).debit, 25, 'charged once');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a request whose lease was taken over creates nothing and is told the key is in progress', async (t) => {
  const { store } = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(store, 100);
  const start = new Date();
  await claim(store, accountId, 'lease-slow', start);
  t.equal((await claim(store, accountId, 'lease-new', new Date(start.getTime() + 61_000))).outcome, 'acquired', 'the abandoned key is taken over');

  const task = createTask({ model: 'alpha-pro', prompt: 'a paper boat' }, { accountId, now: start, newId: () => newIdAt(start) });
  await t.rejects(
    store.insertTaskWithDebit(task, { maxActiveTasks: 10 }, { accountId, key: 'k-1', leaseToken: 'lease-slow', response: response(task.id) }),
    { code: 'idempotency_in_progress' },
  );
  t.equal(await store.getTask(accountId, task.id), null, 'no task');
  t.equal((await store.ledgerTotals(accountId)).debit, 0, 'no charge');
  await assertLedgerInvariant(t, store, accountId);
});
