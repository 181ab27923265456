import { setTimeout as delay } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { s3BehindCuttingProxy } from '../helpers/s3.js';
import { testStoreAdapter } from '../helpers/store.js';
import { ScriptedGenerator, insertTask, newAccountWithTokens, testWorker } from '../helpers/worker.js';

/**
 * The blob store (S3, through a loopback proxy that resets and refuses its connections) away
 * while tasks finish: an image already generated waits for it up to the task's deadline, without
 * spending an attempt or generating again; only the deadline fails a task.
 */

async function runtimeWithS3BehindProxy(t: Test) {
  const { proxy, blobs } = await s3BehindCuttingProxy(t);
  const { store } = await testStoreAdapter().open(t);
  return { store, blobs, proxy };
}

async function until(condition: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await condition()) return true;
    await delay(50);
  }
  return condition();
}

t.test('S3 away for 3 s while 6 tasks finish: all COMPLETED on their first attempt, generated once each', async (t) => {
  const { store, blobs, proxy } = await runtimeWithS3BehindProxy(t);
  const accountId = await newAccountWithTokens(store, 6 * 25);
  const tasks = await Promise.all(Array.from({ length: 6 }, (_, i) => insertTask(store, accountId, `harbour ${i}`)));
  const generator = new ScriptedGenerator(['render']);
  // Longer than the task's three attempts would last with this backoff (200 + 400 ms between
  // them) and than the S3 client's own retries: the worker's storage retries about 0.2, 0.6 and
  // 1.4 s in meet S3 away; a later one (about 3 or 6 s in) finds it back.
  proxy.cut(3_000);
  const worker = testWorker(t, { store, blobs }, { generator, concurrency: 3, retryBaseMs: 200 });
  worker.start();

  const allDone = await until(
    async () =>
      (await Promise.all(tasks.map((task) => store.tasks.getTaskById(task.id)))).every(
        (x) => x?.status === 'COMPLETED',
      ),
    45_000,
  );
  t.ok(allDone, 'every task completed once S3 was back');
  for (const task of tasks) {
    const done = (await store.tasks.getTaskById(task.id))!;
    t.match(done, { status: 'COMPLETED', attempt: 1 }, `${task.prompt}: first attempt`);
    const [item] = done.generated;
    const key = (await store.media.mediaBlobKeys(accountId, [item!.media_id])).get(item!.media_id)!;
    t.equal((await blobs.getBuffer(key))?.length, item!.size_bytes, 'its image is stored');
  }
  t.equal(generator.calls, 6, 'no image was generated twice');
  t.same(await store.accounts.ledgerTotals(accountId), { grant: 150, debit: 150, refund: 0 });
  await assertLedgerInvariant(t, store, accountId);
});

t.test('S3 away past the deadline: that task fails deadline_exceeded, refunded once', async (t) => {
  const { store, blobs, proxy } = await runtimeWithS3BehindProxy(t);
  const accountId = await newAccountWithTokens(store, 100);
  const task = await insertTask(store, accountId);
  proxy.cut(60_000);
  const generator = new ScriptedGenerator(['render']);
  const worker = testWorker(t, { store, blobs }, { generator, deadlineMs: 1500, retryBaseMs: 100 });
  worker.start();

  t.ok(await until(async () => (await store.tasks.getTaskById(task.id))?.status === 'FAILED', 20_000), 'failed');
  const failed = (await store.tasks.getTaskById(task.id))!;
  t.equal(failed.error?.code, 'deadline_exceeded');
  t.match(failed, { attempt: 1, deferredAttempts: 0 }, 'one attempt, held to the deadline');
  t.equal(generator.calls, 1, 'generated once');
  t.same(await store.accounts.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 25 }, 'refunded once');
  await assertLedgerInvariant(t, store, accountId);
});
