import t from 'tap';
import {
  ACTIVE_STATUSES,
  activeTasksCountLimit,
  CLAIM,
  deferredAttemptsAdded,
  nextLostLeaseLook,
  RELEASE,
  taskFinish,
} from '../../src/core/task-execution.js';
import { nextStatus } from '../../src/core/task.js';

t.test('a claim moves a queued task into the running status, a release moves it back', async (t) => {
  t.same(CLAIM, { from: 'CREATED', to: 'IN_PROGRESS' });
  t.same(RELEASE, { from: 'IN_PROGRESS', to: 'CREATED' });
  t.equal(nextStatus(CLAIM.from, 'claim'), CLAIM.to, 'the claim is the state table’s');
  t.equal(RELEASE.from, CLAIM.to, 'only a running attempt can be released');
});

t.test('a deferred release gives its attempt back; any other spends it', async (t) => {
  t.equal(deferredAttemptsAdded({ deferred: true }), 1);
  t.equal(deferredAttemptsAdded({ deferred: false }), 0);
});

t.test('completing the running attempt: one active task fewer, no refund, the completed event', async (t) => {
  t.same(taskFinish('complete', 'attempt'), {
    from: ['IN_PROGRESS'],
    to: 'COMPLETED',
    fencedByAttempt: true,
    activeTasksDelta: -1,
    refund: false,
    webhookEvent: 'image.generation.completed',
  });
});

t.test('failing the running attempt refunds and emits the failed event', async (t) => {
  t.match(taskFinish('fail', 'attempt'), {
    from: ['IN_PROGRESS'],
    to: 'FAILED',
    fencedByAttempt: true,
    activeTasksDelta: -1,
    refund: true,
    webhookEvent: 'image.generation.failed',
  });
});

t.test('a queued task past its deadline fails from the queue, fenced, refunded', async (t) => {
  t.match(taskFinish('fail', 'queued'), {
    from: ['CREATED'],
    to: 'FAILED',
    fencedByAttempt: true,
    activeTasksDelta: -1,
    refund: true,
  });
});

t.test('a cancel moves a task from any active status, whichever attempt holds it', async (t) => {
  const cancel = taskFinish('cancel', 'any');
  t.same([...cancel.from].sort(), ['CREATED', 'IN_PROGRESS']);
  t.equal(cancel.to, 'CANCELED');
  t.equal(cancel.fencedByAttempt, false, 'a client cancels the task, not one attempt');
  t.equal(cancel.activeTasksDelta, -1);
  t.equal(cancel.refund, true);
  t.equal(cancel.webhookEvent, 'image.generation.canceled');
});

t.test('a finish the state table does not allow is refused', async (t) => {
  t.throws(() => taskFinish('complete', 'queued'), { code: 'invalid_state' }, 'a queued task cannot complete');
});

t.test('lost leases are looked for a lease interval later, or when the earliest live lease runs out', async (t) => {
  const at = new Date('2026-11-27T00:00:00Z');
  t.equal(nextLostLeaseLook(at, 30_000, null), at.getTime() + 30_000, 'no lease live: one interval later');
  t.equal(
    nextLostLeaseLook(at, 30_000, new Date(at.getTime() + 5_000)),
    at.getTime() + 5_000,
    'a live lease that runs out sooner brings the look forward',
  );
  t.equal(
    nextLostLeaseLook(at, 30_000, new Date(at.getTime() + 60_000)),
    at.getTime() + 30_000,
    'a longer lease does not put it off: one granted later may be shorter',
  );
});

t.test('the cap counts the non-terminal statuses, and an admission counts one past the cap at most', async (t) => {
  t.same([...ACTIVE_STATUSES].sort(), ['CREATED', 'IN_PROGRESS']);
  t.equal(activeTasksCountLimit(100), 101);
});
