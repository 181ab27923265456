import t from 'tap';
import { EndOfTurnQueue } from '../../src/http/plugins/end-of-turn-writes.js';
import { buildTestApp } from '../helpers/app.js';

/** A queue whose scheduled flushes and clock the test runs itself. */
function heldQueue(onError?: (error: unknown) => void) {
  const flushes: (() => void)[] = [];
  const clock = { now: 0 };
  const queue = new EndOfTurnQueue({ schedule: (flush) => void flushes.push(flush), maxHoldMs: 1, clock: () => clock.now, onError });
  return { queue, flushes, clock };
}

t.test('callbacks added in one turn run together, in order, in one flush', async (t) => {
  const { queue, flushes } = heldQueue();
  const ran: number[] = [];
  for (const n of [1, 2, 3]) queue.add(() => ran.push(n));
  t.equal(flushes.length, 1, 'one flush scheduled');
  t.strictSame(ran, [], 'nothing runs before it');
  flushes[0]();
  t.strictSame(ran, [1, 2, 3]);
});

t.test('a callback added while a flush runs waits for the next one', async (t) => {
  const { queue, flushes } = heldQueue();
  const ran: string[] = [];
  queue.add(() => {
    ran.push('first');
    queue.add(() => ran.push('added by first'));
  });
  queue.add(() => ran.push('second'));
  flushes[0]();
  t.strictSame(ran, ['first', 'second']);
  t.equal(flushes.length, 2, 'a second flush scheduled');
  flushes[1]();
  t.strictSame(ran, ['first', 'second', 'added by first']);
});

t.test('a callback that throws does not keep the others from running', async (t) => {
  const errors: unknown[] = [];
  const { queue, flushes } = heldQueue((error) => errors.push(error));
  const ran: number[] = [];
  queue.add(() => ran.push(1));
  queue.add(() => {
    throw new Error('boom');
  });
  queue.add(() => ran.push(3));
  flushes[0]();
  t.strictSame(ran, [1, 3]);
  t.match(errors, [{ message: 'boom' }]);
});

t.test('a callback added once the first has waited the longest hold runs at once, with those before it', async (t) => {
  const { queue, flushes, clock } = heldQueue();
  const ran: number[] = [];
  queue.add(() => ran.push(1));
  clock.now = 0.5;
  queue.add(() => ran.push(2));
  t.strictSame(ran, [], 'held within the limit');
  clock.now = 1;
  queue.add(() => ran.push(3));
  t.strictSame(ran, [1, 2, 3], 'written at once past it');
  clock.now = 1.2;
  queue.add(() => ran.push(4));
  t.strictSame(ran, [1, 2, 3], 'the next one starts a new hold');
  t.equal(flushes.length, 1, 'and waits for the flush already scheduled');
  flushes[0]();
  t.strictSame(ran, [1, 2, 3, 4]);
});

t.test('concurrent reads over real sockets each get their own task', async (t) => {
  const { app, newAccount } = await buildTestApp(t, { RATE_LIMIT_CREATES_PER_MIN: '1000', RATE_LIMIT_REQUESTS_PER_MIN: '1000' });
  const { auth } = await newAccount();
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: auth, payload: { model: 'alpha-pro', prompt: `task ${i}` } });
    t.equal(res.statusCode, 202);
    ids.push(res.json().data.task_id);
  }
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  const bodies = await Promise.all(
    ids.map(async (id) => {
      const res = await fetch(`${address}/api/v1/images/generations/${id}`, { headers: auth });
      return { status: res.status, requestId: res.headers.get('x-request-id'), body: (await res.json()) as { data?: { task_id: string; prompt: string } } };
    }),
  );
  t.strictSame(
    bodies.map((b) => [b.status, b.body.data?.task_id, b.body.data?.prompt]),
    ids.map((id, i) => [200, id, `task ${i}`]),
  );
  t.equal(new Set(bodies.map((b) => b.requestId)).size, ids.length, 'each with its own request id');
});
