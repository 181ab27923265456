import t from 'tap';
import { ConcurrencyLimit } from '../src/concurrency-limit.js';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

t.test('a waiting job whose signal aborts leaves the queue; the next one gets the slot', async (t) => {
  const limit = new ConcurrencyLimit(1);
  const first = gate();
  const ran: string[] = [];
  const running = limit.run(async () => {
    ran.push('first');
    await first.opened;
  });
  const controller = new AbortController();
  const aborted = limit.run(async () => ran.push('aborted'), controller.signal);
  const third = limit.run(async () => ran.push('third'));
  t.equal(limit.pending, 3);
  const reason = new Error('canceled');
  controller.abort(reason);
  t.equal(
    await aborted.then(
      () => null,
      (error: unknown) => error,
    ),
    reason,
  );
  t.equal(limit.pending, 2);
  first.open();
  await Promise.all([running, third]);
  t.same(ran, ['first', 'third']);
  t.equal(limit.pending, 0);
});

t.test('an already aborted signal is refused before taking a slot', async (t) => {
  const limit = new ConcurrencyLimit(1);
  const reason = new Error('gone');
  const error = await limit
    .run(async () => 'ran', AbortSignal.abort(reason))
    .then(
      () => null,
      (e: unknown) => e,
    );
  t.equal(error, reason);
  t.equal(limit.pending, 0);
});
