import fc from 'fast-check';
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

t.test('several tasks of an account take turns as if the older ones were already in progress', async (t) => {
  const order = claimOrder([
    { id: '03', accountId: 'burst', inProgress: 0 },
    { id: '01', accountId: 'burst', inProgress: 0 },
    { id: '05', accountId: 'small', inProgress: 1 },
    { id: '02', accountId: 'burst', inProgress: 0 },
    { id: '07', accountId: 'other', inProgress: 0 },
  ]);
  t.same(
    order.map((c) => c.id),
    ['01', '07', '02', '05', '03'],
  );
});

t.test('the first k of the order are what k claims one after another take', async (t) => {
  // The rule stated as a simulation: each claim takes the next task of the account with the
  // fewest in progress (the ones this simulation claimed included), ties to the oldest task.
  const oneByOne = (candidates: { id: string; accountId: string; inProgress: number }[]) => {
    const left = [...candidates].sort((a, b) => (a.id < b.id ? -1 : 1));
    const claimed = new Map<string, number>();
    const taken: string[] = [];
    while (left.length > 0) {
      const heads = left.filter((c, i) => left.findIndex((o) => o.accountId === c.accountId) === i);
      const turn = (c: (typeof left)[number]) => c.inProgress + (claimed.get(c.accountId) ?? 0);
      const next = heads.reduce((best, c) =>
        turn(c) < turn(best) || (turn(c) === turn(best) && c.id < best.id) ? c : best,
      );
      taken.push(next.id);
      claimed.set(next.accountId, (claimed.get(next.accountId) ?? 0) + 1);
      left.splice(left.indexOf(next), 1);
    }
    return taken;
  };
  const accountTasks = fc.record({ inProgress: fc.nat(4), tasks: fc.integer({ min: 1, max: 4 }) });
  fc.assert(
    fc.property(
      fc.array(accountTasks, { minLength: 1, maxLength: 5 }),
      fc.infiniteStream(fc.nat(999)),
      (accounts, ids) => {
        const used = new Set<number>();
        const candidates = accounts.flatMap((account, a) =>
          Array.from({ length: account.tasks }, () => {
            let id = ids.next().value;
            while (used.has(id)) id = (id + 1) % 1000;
            used.add(id);
            return { id: String(id).padStart(3, '0'), accountId: `account-${a}`, inProgress: account.inProgress };
          }),
        );
        return (
          claimOrder(candidates)
            .map((c) => c.id)
            .join() === oneByOne(candidates).join()
        );
      },
    ),
    { numRuns: 200 },
  );
  t.pass('200 random queues of up to 5 accounts');
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
