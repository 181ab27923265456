import t, { type Test } from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { TaskService } from '../../src/services/task-service.js';
import type { Store } from '../../src/store/port.js';
import { testStoreAdapter } from '../helpers/store.js';
import { insertTask, newAccountWithTokens } from '../helpers/worker.js';

/**
 * A TaskService over a real store whose task reads can be held at a gate, with a fallback re-read
 * far beyond the test's time: whatever ends a wait here is a change signal or the wait's own end.
 */
async function waitingService(t: Test, fallbackMs = 60_000) {
  const { store } = await testStoreAdapter().open(t);
  const events = new TaskEvents();
  let gate: Promise<void> | null = null;
  let reads = 0;
  let stateReads = 0;
  const gatedStore = {
    ...store,
    tasks: Object.assign(Object.create(store.tasks) as Store['tasks'], {
      async getTask(accountId: string, taskId: string) {
        reads++;
        const task = await store.tasks.getTask(accountId, taskId);
        await gate;
        return task;
      },
      async getTaskStates(taskIds: readonly string[]) {
        stateReads++;
        return store.tasks.getTaskStates(taskIds);
      },
    }),
  } as Store;
  const service = new TaskService({
    store: gatedStore,
    events,
    now: () => new Date(),
    crossProcessPollMs: fallbackMs,
  });
  const accountId = await newAccountWithTokens(store, 100);
  const task = await insertTask(store, accountId);
  const complete = async ({ signal = true } = {}) => {
    const [claimed] = await store.tasks.claimTasks(
      { now: new Date(), leaseMs: 60_000, maxAttempts: 3, deadlineMs: 3_600_000 },
      1,
    );
    t.ok(await store.tasks.completeTask({ taskId: claimed.id, attempt: claimed.attempt, media: [], now: new Date() }));
    if (signal) events.taskChanged(claimed.id);
  };
  return {
    service,
    accountId,
    task,
    complete,
    reads: () => reads,
    stateReads: () => stateReads,
    holdReads() {
      const opened = Promise.withResolvers<void>();
      gate = opened.promise;
      return () => {
        gate = null;
        opened.resolve();
      };
    },
  };
}

const never = new AbortController().signal;

t.test('a wait ends at the change signal of its task', async (t) => {
  const { service, accountId, task, complete } = await waitingService(t);
  const waiting = service.waitForTerminal(accountId, task.id, 30_000, never);
  await new Promise((resolve) => setImmediate(resolve));
  await complete();
  t.equal((await waiting).status, 'COMPLETED');
});

t.test('a change signalled while the wait reads is not lost: it reads again at once', async (t) => {
  const { service, accountId, task, complete, holdReads, reads } = await waitingService(t);
  const release = holdReads();
  const waiting = service.waitForTerminal(accountId, task.id, 30_000, never);
  await new Promise((resolve) => setImmediate(resolve));
  // The first read has seen CREATED and is held; the task completes and signals meanwhile.
  await complete();
  release();
  const started = Date.now();
  t.equal((await waiting).status, 'COMPLETED');
  t.ok(Date.now() - started < 5_000, 'without waiting for the fallback re-read (60 s)');
  t.equal(reads(), 2, 'the first read, and one after the signal');
});

t.test('a wait ends with the task as it is when its time is up, or when the client leaves', async (t) => {
  const { service, accountId, task } = await waitingService(t, 20);
  const timedOut = await service.waitForTerminal(accountId, task.id, 100, never);
  t.equal(timedOut.status, 'CREATED');
  const leaving = new AbortController();
  const waiting = service.waitForTerminal(accountId, task.id, 30_000, leaving.signal);
  leaving.abort();
  t.equal((await waiting).status, 'CREATED');
});

t.test('a read that does not wait reads once', async (t) => {
  const { service, accountId, task, reads } = await waitingService(t);
  t.equal((await service.waitForTerminal(accountId, task.id, 0, never)).id, task.id);
  t.equal(reads(), 1);
});

t.test('the change poll finds a change nobody signalled here (another process made it)', async (t) => {
  const { service, accountId, task, complete } = await waitingService(t, 20);
  const waiting = service.waitForTerminal(accountId, task.id, 30_000, never);
  await new Promise((resolve) => setImmediate(resolve));
  await complete({ signal: false });
  const started = Date.now();
  t.equal((await waiting).status, 'COMPLETED');
  t.ok(Date.now() - started < 5_000, 'within a few poll intervals');
});

t.test('a wait re-reads its task only when it moved: the change poll reads the states of all', async (t) => {
  const { service, accountId, task, reads, stateReads } = await waitingService(t, 20);
  const started = Date.now();
  const waited = await service.waitForTerminal(accountId, task.id, 400, never);
  t.equal(waited.status, 'CREATED');
  t.ok(Date.now() - started >= 400, 'not before its deadline, though the wheel reaches 20 ms ahead');
  t.ok(stateReads() >= 5, `the poll looked every 20 ms or so (${stateReads()} rounds)`);
  t.equal(reads(), 2, 'the first read and the one at the deadline; none for a poll that found no change');
});

t.test('waits on one task each see a change the poll finds, whoever read last', async (t) => {
  const { service, accountId, task, complete } = await waitingService(t, 20);
  const first = service.waitForTerminal(accountId, task.id, 30_000, never);
  const second = service.waitForTerminal(accountId, task.id, 30_000, never);
  await new Promise((resolve) => setTimeout(resolve, 50));
  await complete({ signal: false });
  const [a, b] = await Promise.all([first, second]);
  t.equal(a.status, 'COMPLETED');
  t.equal(b.status, 'COMPLETED');
});
