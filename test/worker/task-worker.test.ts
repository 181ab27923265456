import sharp from 'sharp';
import t from 'tap';
import { createTask } from '../../src/core/task.js';
import { LocalRenderer } from '../../src/generators/local-renderer.js';
import { GenerationError } from '../../src/generators/port.js';
import { newIdAt } from '../../src/ids.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { AwaitedList } from '../helpers/awaited-list.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import {
  GatedGenerator,
  ScriptedGenerator,
  insertTask,
  newAccountWithTokens,
  oneQueuedTask,
  openTestRuntime,
  testWorker,
} from '../helpers/worker.js';
import { claimNextTask } from '../helpers/store.js';

const permanent = new GenerationError('content_rejected', 'The prompt was rejected.', false);
const transient = new GenerationError('generator_unavailable', 'Try again.', true);

async function refunds(store: Parameters<typeof assertLedgerInvariant>[1], accountId: string) {
  return (await store.accounts.ledgerTotals(accountId)).refund;
}

t.test('a claimed task is rendered, stored as generated media and COMPLETED', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const worker = testWorker(t, deps);

  t.equal(await worker.runOnce(), true);
  const done = await deps.store.tasks.getTaskById(task.id);
  t.equal(done?.status, 'COMPLETED');
  t.equal(done?.attempt, 1);
  t.ok(done?.startedAt && done.completedAt);
  t.equal(done?.generated.length, 1);
  const item = done!.generated[0];
  t.match(item, { content_type: 'image/png', width: 1024, height: 1024 });
  const keys = await deps.store.media.mediaBlobKeys(accountId, [item.media_id]);
  const bytes = await deps.blobs.getBuffer(keys.get(item.media_id)!);
  const metadata = await sharp(bytes!).metadata();
  t.same([metadata.format, metadata.width, metadata.height], ['png', 1024, 1024]);
  t.equal(item.size_bytes, bytes!.length);
  t.equal(await worker.runOnce(), false, 'nothing left to claim');
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('a permanent generator error fails the task with its code and refunds once', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const worker = testWorker(t, deps, { generator: new ScriptedGenerator([permanent]) });

  await worker.runOnce();
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.same(failed?.error, { code: 'content_rejected', message: 'The prompt was rejected.' });
  t.equal(await refunds(deps.store, accountId), 25);
  t.equal((await deps.store.accounts.getAccount(accountId))?.balance, 100);
  t.equal(await deps.store.tasks.refundTask(task.id, new Date()), false, 'a second refund is refused');
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('transient errors are retried with backoff; success on the third attempt is not refunded', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const generator = new ScriptedGenerator([transient, transient, 'render']);
  let clock = Date.now();
  const worker = testWorker(t, deps, { generator, retryBaseMs: 60_000, now: () => new Date(clock) });

  await worker.runOnce();
  t.equal(
    (await deps.store.tasks.getTaskById(task.id))?.status,
    'CREATED',
    'back in the queue after a transient error',
  );
  t.equal(await worker.runOnce(), false, 'not runnable before its backoff is over');
  clock += 3 * 60_000;
  await worker.runOnce();
  clock += 3 * 60_000;
  await worker.runOnce();
  const done = await deps.store.tasks.getTaskById(task.id);
  t.equal(done?.status, 'COMPLETED');
  t.equal(done?.attempt, 3);
  t.equal(generator.calls, 3);
  t.equal(await refunds(deps.store, accountId), 0);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('transient errors past the attempt limit fail the task with one refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  let clock = Date.now();
  const worker = testWorker(t, deps, {
    generator: new ScriptedGenerator([transient]),
    maxAttempts: 2,
    now: () => new Date(clock),
  });

  for (let i = 0; i < 2; i++) {
    await worker.runOnce();
    clock += 60_000;
  }
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'generator_unavailable');
  t.equal(await refunds(deps.store, accountId), 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('a task past its deadline fails at claim time with one refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const worker = testWorker(t, deps, { deadlineMs: 1000, now: () => new Date(Date.now() + 5000) });

  t.equal(await worker.runOnce(), false);
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'deadline_exceeded');
  t.equal(await refunds(deps.store, accountId), 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test("a stale worker's completion after its lease was taken over is rejected", async (t) => {
  const { store } = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(store, 100);
  const task = await insertTask(store, accountId);
  const policy = { leaseMs: 1000, maxAttempts: 3, deadlineMs: 600_000 };
  const start = Date.now();

  const first = await claimNextTask(store.tasks, { ...policy, now: new Date(start) });
  t.equal(first?.attempt, 1);
  t.equal(
    await claimNextTask(store.tasks, { ...policy, now: new Date(start + 500) }),
    null,
    'a live lease is not taken over',
  );
  const second = await claimNextTask(store.tasks, { ...policy, now: new Date(start + 2000) });
  t.equal(second?.attempt, 2, 'the expired lease is taken over by a new attempt');

  t.equal(
    await store.tasks.renewLease(task.id, 1, new Date(start + 2100), 1000),
    false,
    'the stale attempt cannot renew',
  );
  t.equal(
    await store.tasks.completeTask({ taskId: task.id, attempt: 1, media: [], now: new Date(start + 2200) }),
    false,
    'nor complete',
  );
  t.equal(
    await store.tasks.failTask({
      taskId: task.id,
      attempt: 1,
      error: { code: 'x', message: 'x' },
      now: new Date(start + 2200),
    }),
    false,
    'nor fail',
  );
  t.equal((await store.tasks.getTaskById(task.id))?.status, 'IN_PROGRESS');
  t.equal(
    await store.tasks.completeTask({ taskId: task.id, attempt: 2, media: [], now: new Date(start + 2300) }),
    true,
    'the owner completes',
  );
  t.equal((await store.tasks.getTaskById(task.id))?.status, 'COMPLETED');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a task whose lease keeps expiring fails after the attempt limit, refunded once', async (t) => {
  const { store } = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(store, 100);
  const task = await insertTask(store, accountId);
  const policy = { leaseMs: 1000, maxAttempts: 2, deadlineMs: 600_000 };
  const start = Date.now();
  await claimNextTask(store.tasks, { ...policy, now: new Date(start) });
  await claimNextTask(store.tasks, { ...policy, now: new Date(start + 2000) });
  t.equal(await claimNextTask(store.tasks, { ...policy, now: new Date(start + 4000) }), null);
  const failed = await store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'worker_lost');
  t.equal(await refunds(store, accountId), 25);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('cancel of a CREATED task: CANCELED, refunded, never run', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const canceled = await deps.store.tasks.cancelTask(accountId, task.id, new Date());
  t.equal(canceled.status, 'CANCELED');
  t.ok(canceled.completedAt);
  t.equal(await testWorker(t, deps).runOnce(), false, 'a canceled task is not claimed');
  t.equal(await refunds(deps.store, accountId), 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('cancel of an IN_PROGRESS task aborts the generation; double cancel is 409 with still one refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const events = new TaskEvents();
  const generator = new GatedGenerator();
  const worker = testWorker(t, deps, { generator, events });

  const running = worker.runOnce();
  await generator.started;
  t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'IN_PROGRESS');
  await deps.store.tasks.cancelTask(accountId, task.id, new Date());
  events.taskChanged(task.id);
  await running;

  const canceled = await deps.store.tasks.getTaskById(task.id);
  t.equal(canceled?.status, 'CANCELED');
  t.same(canceled?.generated, []);
  await t.rejects(deps.store.tasks.cancelTask(accountId, task.id, new Date()), { code: 'invalid_state' });
  t.equal(await refunds(deps.store, accountId), 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('a late result after a cancel is discarded and its images deleted', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const generator = new GatedGenerator({ ignoreAbort: true });
  // No events: the worker only learns of the cancel when it tries to finish.
  const worker = testWorker(t, deps, { generator, events: undefined });

  const running = worker.runOnce();
  await generator.started;
  await deps.store.tasks.cancelTask(accountId, task.id, new Date());
  generator.open();
  await running;

  const canceled = await deps.store.tasks.getTaskById(task.id);
  t.equal(canceled?.status, 'CANCELED');
  t.same(canceled?.generated, []);
  t.same(await deps.storedBlobKeys(), [], 'no orphan blobs left behind');
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('cancel of a COMPLETED task is 409 invalid_state and refunds nothing', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  await testWorker(t, deps).runOnce();
  await t.rejects(deps.store.tasks.cancelTask(accountId, task.id, new Date()), { code: 'invalid_state' });
  t.equal(await refunds(deps.store, accountId), 0);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('shutdown lets a task finish within the grace period', async (t) => {
  const { deps, task } = await oneQueuedTask(t);
  const generator = new GatedGenerator();
  const worker = testWorker(t, deps, { generator });
  worker.start();
  await generator.started;
  const stopped = worker.stop(60_000);
  generator.open();
  await stopped;
  t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'COMPLETED');
});

t.test('shutdown releases a task still running after the grace period back to CREATED', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const generator = new GatedGenerator();
  const worker = testWorker(t, deps, { generator });
  worker.start();
  await generator.started;
  await worker.stop(10);
  const released = await deps.store.tasks.getTaskById(task.id);
  t.equal(released?.status, 'CREATED');
  t.equal(await refunds(deps.store, accountId), 0);
  t.equal(await testWorker(t, deps).runOnce(), true, 'another worker picks it up');
  t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'COMPLETED');
});

t.test("a completed task's images are not swept as orphans; a crashed writer's blob is", async (t) => {
  const { sweepExpiredMedia } = await import('../../src/services/media-sweeper.js');
  const { deps, accountId, task } = await oneQueuedTask(t);
  await testWorker(t, deps, { resultRetentionMs: 24 * 3600_000 }).runOnce();
  const [item] = (await deps.store.tasks.getTaskById(task.id))!.generated;
  const key = (await deps.store.media.mediaBlobKeys(accountId, [item.media_id])).get(item.media_id)!;

  // A writer that died after putting its blob but before recording it.
  const orphanKey = 'media/orphan-of-a-crashed-worker';
  await deps.store.media.scheduleBlobDeletion(orphanKey, new Date(Date.now() + 3600_000));
  await deps.blobs.put(orphanKey, Buffer.from('partial work'));

  await sweepExpiredMedia({ store: deps.store.media, blobs: deps.blobs, now: new Date(Date.now() + 2 * 3600_000) });
  t.ok(await deps.blobs.getBuffer(key), 'the result survives the sweep');
  t.equal(await deps.blobs.getBuffer(orphanKey), null, 'the orphan is swept after its grace period');
});

t.test('a task created for one model wakes only the backends that run it', async (t) => {
  const deps = await openTestRuntime(t);
  const events = new TaskEvents();
  // The models of each claim the worker makes, through the store's own claim.
  const made = new AwaitedList<readonly string[] | undefined>();
  const claims = made.items;
  const claimsMade = (count: number) => made.reached(count);
  const claimTasks = deps.store.tasks.claimTasks.bind(deps.store.tasks);
  deps.store.tasks.claimTasks = async (policy, limit) => {
    made.push(policy.models);
    return claimTasks(policy, limit);
  };
  const worker = testWorker(t, deps, {
    events,
    // Long: every claim below comes from a signal, none from the poll.
    pollMs: 600_000,
    backends: [
      { name: 'alpha', models: ['alpha-pro'], generator: new LocalRenderer(), slots: 1 },
      { name: 'beta', models: ['beta-v5-pro'], generator: new LocalRenderer(), slots: 1 },
    ],
  });
  worker.start();
  await claimsMade(2);
  t.same(claims, [['alpha-pro'], ['beta-v5-pro']], 'the start claims for every backend');

  const accountId = await newAccountWithTokens(deps.store, 1000);
  const now = new Date();
  const task = createTask(
    { model: 'beta-v5-pro', prompt: 'a kite over dunes' },
    { accountId, now, newId: () => newIdAt(now) },
  );
  await deps.store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });
  const completed = new Promise<void>((resolve) => {
    events.onChanged(task.id, () => {
      void deps.store.tasks.getTaskById(task.id).then((current) => current?.status === 'COMPLETED' && resolve());
    });
  });
  events.taskCreated('beta-v5-pro');
  await completed;
  await claimsMade(4);
  t.same(claims.slice(2), [['beta-v5-pro'], ['beta-v5-pro']], 'the create, then the slot its task freed');

  const before = claims.length;
  // A signal that names no model (a process of an earlier version) wakes every backend.
  events.taskCreated();
  await claimsMade(before + 2);
  t.same(claims.slice(before), [['alpha-pro'], ['beta-v5-pro']]);
});
