import t from 'tap';
import {
  admitsAnotherActiveTask,
  afterLostLease,
  countsAsActive,
  isPastDeadline,
  webhookEventFor,
} from '../../src/core/task-execution.js';

t.test('a lost lease requeues until the last allowed attempt, which fails as worker_lost', async (t) => {
  t.same(afterLostLease(1, 3), { action: 'requeue' });
  t.same(afterLostLease(2, 3), { action: 'requeue' });
  t.match(afterLostLease(3, 3), { action: 'fail', error: { code: 'worker_lost' } });
  t.match(afterLostLease(1, 1), { action: 'fail' }, 'one attempt allowed: no second chance');
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
