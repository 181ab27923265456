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
  const cancel = timers.after(20, () => ran.push('canceled'));
  const kept = new Promise<void>((resolve) =>
    timers.after(20, () => {
      ran.push('kept');
      resolve();
    }),
  );
  cancel();
  cancel();
  await kept;
  t.same(ran, ['kept']);
});

t.test('delays past the horizon go round the wheel; callbacks run in order of their delays', async (t) => {
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
  const elapsed = performance.now() - started;
  t.same(ran, [10, 40, 80]);
  t.ok(elapsed < 500, 'the 80 ms delay ran within a few ticks of it');
  t.ok(elapsed >= 79, `the 80 ms delay did not run early (${elapsed.toFixed(1)} ms)`);
});

t.test('a busy event loop does not stretch the delays: the wheel keeps to the clock', async (t) => {
  // The interval runs late while the loop is busy; a wheel that moved one slot a run would
  // still need 50 runs (≥ 500 ms) after the loop is free again to reach the 500 ms slot.
  const timers = new WaitTimers(10, 1000);
  const started = performance.now();
  const ran = new Promise<number>((resolve) => timers.after(500, () => resolve(performance.now())));
  await new Promise((resolve) => setTimeout(resolve, 20));
  const busyUntil = performance.now() + 600;
  while (performance.now() < busyUntil) {
    // the event loop is held, as thousands of streams' work holds it
  }
  const ranAt = await ran;
  t.ok(ranAt - started >= 500, `not early (${(ranAt - started).toFixed(1)} ms)`);
  t.ok(ranAt - busyUntil < 250, `ran ${(ranAt - busyUntil).toFixed(1)} ms after the loop was free`);
});

t.test('a clock that moves in jumps: each run takes every slot whose time has come', async (t) => {
  let now = 1_000;
  const timers = new WaitTimers(10, 100, () => now);
  const ran: number[] = [];
  for (const delay of [10, 30, 250]) timers.after(delay, () => ran.push(delay));
  const cancelled = timers.after(40, () => ran.push(40));
  cancelled();
  now += 35;
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.same(ran, [10, 30], 'one run after the jump took both due slots, and not the later one');
  now += 200;
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.same(ran, [10, 30], 'a delay past the horizon waits for its own time');
  now += 20;
  await new Promise((resolve) => setTimeout(resolve, 30));
  t.same(ran, [10, 30, 250]);
});
