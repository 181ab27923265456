import t from 'tap';
import {
  admitsAnotherActiveTask,
  afterLostLease,
  claimOrder,
  countsAsActive,
  isPastDeadline,
  webhookEventFor,
} from '../../src/core/task-execution.js';

t.test('a lost lease requeues until the last allowed attempt, which fails as worker_lost', async (t) => {
  const claims = (attempt: number, deferredAttempts = 0) => ({ attempt, deferredAttempts });
  t.same(afterLostLease(claims(1), 3), { action: 'requeue' });
  t.same(afterLostLease(claims(2), 3), { action: 'requeue' });
  t.match(afterLostLease(claims(3), 3), { action: 'fail', error: { code: 'worker_lost' } });
  t.match(afterLostLease(claims(1), 1), { action: 'fail' }, 'one attempt allowed: no second chance');
  t.same(afterLostLease(claims(5, 3), 3), { action: 'requeue' }, 'claims deferred for capacity spent no attempt');
});

t.test('claims serve accounts in turn: fewest in progress first, then the oldest task', async (t) => {
  const order = claimOrder([
    { id: '01', accountId: 'burst', inProgress: 5 },
    { id: '07', accountId: 'small-2', inProgress: 0 },
    { id: '05', accountId: 'small-1', inProgress: 0 },
    { id: '03', accountId: 'other', inProgress: 1 },
  ]);
  t.same(
    order.map((c) => c.accountId),
    ['small-1', 'small-2', 'other', 'burst'],
  );
});

t.test('the deadline is reached at exactly createdAt + deadlineMs', async (t) => {
  const created = new Date('2026-01-01T00:00:00Z');
  t.notOk(isPastDeadline(created, new Date(created.getTime() + 999), 1000));
  t.ok(isPastDeadline(created, new Date(created.getTime() + 1000), 1000));
});

t.test('the cap admits a task while the active count is below it', async (t) => {
  t.ok(admitsAnotherActiveTask(2, 3));
  t.notOk(admitsAnotherActiveTask(3, 3));
  t.same(
    ['CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED'].map((s) => countsAsActive(s as never)),
    [true, true, false, false, false],
  );
});

t.test('only a move into a terminal state emits a webhook event, named after it', async (t) => {
  t.equal(webhookEventFor('COMPLETED'), 'image.generation.completed');
  t.equal(webhookEventFor('FAILED'), 'image.generation.failed');
  t.equal(webhookEventFor('CANCELED'), 'image.generation.canceled');
  t.equal(webhookEventFor('IN_PROGRESS'), null);
  t.equal(webhookEventFor('CREATED'), null);
});
