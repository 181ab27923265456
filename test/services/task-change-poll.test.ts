// Not in the PostgreSQL pass: the change poll over a fake task reader.
import t, { type Test } from 'tap';
import type { TaskRecord } from '../../src/core/task.js';
import { TaskChangePoll, type PolledWait } from '../../src/services/task-change-poll.js';
import type { TaskState } from '../../src/store/port.js';

/** A store of task states the test moves by hand, and the batches the poll asked it for. */
function statesOf(initial: Record<string, Pick<TaskRecord, 'status' | 'attempt'>>) {
  const states = new Map(Object.entries(initial));
  const batches: string[][] = [];
  let failing = false;
  return {
    batches,
    move(id: string, state: Pick<TaskRecord, 'status' | 'attempt'>) {
      states.set(id, state);
    },
    fail(value: boolean) {
      failing = value;
    },
    async read(ids: readonly string[]): Promise<TaskState[]> {
      batches.push([...ids]);
      if (failing) throw new Error('store unreachable');
      return ids.flatMap((id) => {
        const state = states.get(id);
        return state ? [{ id, ...state }] : [];
      });
    },
  };
}

/** The poll with these waits added, removed again when the test ends (its interval would run on). */
function pollOver(t: Test, poll: TaskChangePoll, waits: readonly PolledWait[]): TaskChangePoll {
  for (const wait of waits) poll.add(wait);
  t.teardown(() => {
    for (const wait of waits) poll.delete(wait);
  });
  return poll;
}

function waitOn(taskId: string, seenStep: number | null) {
  const wait = { taskId, seenStep, wakes: 0, wake: () => wait.wakes++ };
  return wait satisfies PolledWait;
}

// taskStepOf: CREATED at attempt 0 is step 1, IN_PROGRESS at attempt 1 is step 3, COMPLETED at 1 is 5.
t.test('one round wakes the waits whose task moved since their read, and only those', async (t) => {
  const store = statesOf({ a: { status: 'CREATED', attempt: 0 }, b: { status: 'CREATED', attempt: 0 } });
  const onA = waitOn('a', 1);
  const alsoOnA = waitOn('a', 3);
  const onB = waitOn('b', 1);
  const poll = pollOver(t, new TaskChangePoll(store.read, 60_000), [onA, alsoOnA, onB]);

  await poll.poll();
  t.same(
    [onA.wakes, alsoOnA.wakes, onB.wakes],
    [0, 1, 0],
    'a wait that read a later step than the store has is woken too',
  );
  t.same(store.batches, [['a', 'b']], 'each task asked about once, however many wait on it');

  store.move('b', { status: 'COMPLETED', attempt: 1 });
  await poll.poll();
  t.same([onA.wakes, alsoOnA.wakes, onB.wakes], [0, 2, 1]);
});

t.test('a wait whose first read has not returned is not asked about; a task gone wakes its waits', async (t) => {
  const store = statesOf({ a: { status: 'IN_PROGRESS', attempt: 1 } });
  const reading = waitOn('a', null);
  const onGone = waitOn('gone', 1);
  const poll = pollOver(t, new TaskChangePoll(store.read, 60_000), [reading, onGone]);
  await poll.poll();
  t.same(store.batches, [['gone']]);
  t.equal(reading.wakes, 0);
  t.equal(onGone.wakes, 1, 'its read will say what became of it');
});

t.test('thousands of waited tasks are read in batches, with the event loop served between them', async (t) => {
  const initial: Record<string, Pick<TaskRecord, 'status' | 'attempt'>> = {};
  for (let i = 0; i < 1200; i++) initial[`t${i}`] = { status: 'CREATED', attempt: 0 };
  const store = statesOf(initial);
  const waits = Object.keys(initial).map((id) => waitOn(id, 1));
  const poll = pollOver(t, new TaskChangePoll(store.read, 60_000, 500), waits);
  let servedBetween = false;
  setImmediate(() => (servedBetween = store.batches.length === 1));
  await poll.poll();
  t.same(
    store.batches.map((batch) => batch.length),
    [500, 500, 200],
  );
  t.ok(servedBetween, 'an immediate queued before the round ran after its first batch');
  t.equal(
    waits.reduce((sum, wait) => sum + wait.wakes, 0),
    0,
  );
});

t.test('a round that fails wakes nobody, and the next one reads again', async (t) => {
  const store = statesOf({ a: { status: 'COMPLETED', attempt: 1 } });
  const wait = waitOn('a', 1);
  const poll = pollOver(t, new TaskChangePoll(store.read, 60_000), [wait]);
  store.fail(true);
  await poll.poll();
  t.equal(wait.wakes, 0);
  store.fail(false);
  await poll.poll();
  t.equal(wait.wakes, 1);
});

t.test('rounds run on the interval while anything waits, and stop when the last wait leaves', async (t) => {
  const store = statesOf({ a: { status: 'CREATED', attempt: 0 } });
  const poll = new TaskChangePoll(store.read, 10);
  const wait = waitOn('a', 1);
  poll.add(wait);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const rounds = store.batches.length;
  t.ok(rounds >= 3, `${rounds} rounds in 100 ms`);
  poll.delete(wait);
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.equal(store.batches.length, rounds, 'no round without a wait');
});
