// Not in the PostgreSQL pass: the long-poll timers alone, no store.
import t from 'tap';
import { WaitTimers } from '../../src/services/wait-timers.js';

t.test('a callback runs once, not before its delay, and at most a tick after it', async (t) => {
  const timers = new WaitTimers(5, 100);
  const started = performance.now();
  let runs = 0;
  await new Promise<void>((resolve) =>
    timers.after(30, () => {
      runs++;
      resolve();
    }),
  );
  const elapsed = performance.now() - started;
  t.ok(elapsed >= 29, `ran after ${elapsed.toFixed(1)} ms`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(runs, 1);
});

t.test('a canceled callback never runs; the others in its slot do', async (t) => {
  const timers = new WaitTimers(5, 100);
  const ran: string[] = [];
  const canceled = () => ran.push('canceled');
  const slot = timers.after(20, canceled);
  const kept = new Promise<void>((resolve) =>
    timers.after(20, () => {
      ran.push('kept');
      resolve();
    }),
  );
  timers.cancel(slot, canceled);
  timers.cancel(slot, canceled);
  await kept;
  t.same(ran, ['kept']);
});

t.test(
  'a callback that ran can be re-armed from within itself, and a late cancel of its old slot is harmless',
  async (t) => {
    const timers = new WaitTimers(5, 100);
    let runs = 0;
    let slot = -1;
    await new Promise<void>((resolve) => {
      const fire = () => {
        runs++;
        timers.cancel(slot, fire);
        if (runs < 3) slot = timers.after(10, fire);
        else resolve();
      };
      slot = timers.after(10, fire);
    });
    await new Promise((resolve) => setTimeout(resolve, 40));
    t.equal(runs, 3, 'three runs, no more');
  },
);

t.test('delays past the horizon are cut to it; callbacks run in order of their delays', async (t) => {
  const timers = new WaitTimers(5, 50);
  const ran: number[] = [];
  const all = [80, 10, 40].map(
    (delay) =>
      new Promise<void>((resolve) =>
        timers.after(delay, () => {
          ran.push(delay);
          resolve();
        }),
      ),
  );
  const started = performance.now();
  await Promise.all(all);
  t.same(ran, [10, 40, 80]);
  t.ok(performance.now() - started < 500, 'the 80 ms delay ran within the 50 ms horizon and a few ticks');
});
