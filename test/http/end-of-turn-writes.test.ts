import t from 'tap';
import { EndOfTurnQueue } from '../../src/http/plugins/end-of-turn-writes.js';
import { buildTestApp } from '../helpers/app.js';

/** A scheduler that keeps the flushes it is given, for the test to run when it chooses. */
function heldFlushes() {
  const flushes: (() => void)[] = [];
  return { schedule: (flush: () => void) => void flushes.push(flush), flushes };
}

t.test('callbacks added in one turn run together, in order, in one flush', async (t) => {
  const { schedule, flushes } = heldFlushes();
  const queue = new EndOfTurnQueue(schedule);
  const ran: number[] = [];
  for (const n of [1, 2, 3]) queue.add(() => ran.push(n));
  t.equal(flushes.length, 1, 'one flush scheduled');
  t.strictSame(ran, [], 'nothing runs before it');
  flushes[0]();
  t.strictSame(ran, [1, 2, 3]);
});

t.test('a callback added while a flush runs waits for the next one', async (t) => {
  const { schedule, flushes } = heldFlushes();
  const queue = new EndOfTurnQueue(schedule);
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
  const { schedule, flushes } = heldFlushes();
  const errors: unknown[] = [];
  const queue = new EndOfTurnQueue(schedule, (error) => errors.push(error));
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
