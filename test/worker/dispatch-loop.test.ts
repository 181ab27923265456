// Not in the PostgreSQL pass: the dispatch loop over fake tasks, no store.
import { setImmediate as turn } from 'node:timers/promises';
import t, { type Test } from 'tap';
import type { TaskRecord } from '../../src/core/task.js';
import { LocalRenderer } from '../../src/generators/local-renderer.js';
import { BackendLane } from '../../src/worker/backend-lane.js';
import { DispatchLoop } from '../../src/worker/dispatch-loop.js';
import { silentLog } from '../../src/worker/worker-log.js';
import { AwaitedList } from '../helpers/awaited-list.js';

/**
 * The worker's loop (src/worker/dispatch-loop.ts) with its claims and runs faked: which claims it
 * makes, and when. The loop never reads a task; it hands what the claim returned to run.
 */
function loopOf(
  t: Test,
  lanes: BackendLane[],
  claim: (lane: BackendLane, limit: number) => TaskRecord[],
  // Long by default: a claim that comes without a poke would have to wait for it, and the test
  // would time out.
  pollMs = 600_000,
) {
  const claimsMade = new AwaitedList<string>();
  const claims = claimsMade.items;
  const started = new AwaitedList<{ task: TaskRecord; finish: () => void }>();
  const runs = started.items;
  const loop: DispatchLoop = new DispatchLoop({
    lanes,
    pollMs,
    now: () => new Date(),
    beforeClaims: async () => {},
    claim: async (lane, limit) => {
      claimsMade.push(`${lane.backend.name} ${limit}`);
      return claim(lane, limit);
    },
    run: (_lane, task) =>
      new Promise<void>((finish) => {
        started.push({ task, finish });
      }),
    log: silentLog,
  });
  t.teardown(async () => {
    const stopped = loop.stop();
    for (const run of runs) run.finish();
    await stopped;
  });
  const runsStarted = (count: number) => started.reached(count);
  return { loop, claims, runs, runsStarted, claimsMade: (count: number) => claimsMade.reached(count) };
}

const lane = (name: string, slots: number) => new BackendLane({ name, generator: new LocalRenderer(), slots });
const task = (id: string) => ({ id }) as TaskRecord;
/** Lets the loop go on as far as it goes without a poke or a timer. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await turn();
};

t.test('a poke claims each lane once; a lane the claim did not fill waits for the next poke', async (t) => {
  const queued = [task('t1')];
  const local = lane('local', 2);
  const gemini = lane('gemini', 4);
  const { loop, claims, runsStarted } = loopOf(t, [local, gemini], (l) => (l === local ? queued.splice(0, 1) : []));
  loop.start();
  await settle();
  t.same(claims, ['local 2', 'gemini 4'], 'the start fills every lane, and launches the queued task');
  claims.length = 0;

  queued.push(task('t2'));
  loop.poke();
  await runsStarted(2);
  await settle();
  t.same(claims, ['local 1', 'gemini 4'], 'one claim per lane: no second turn after the launch');
});

t.test('a poke that comes during the claims gives another turn at once', async (t) => {
  const queued: TaskRecord[] = [];
  const local = lane('local', 2);
  let pokeDuringClaim: (() => void) | null = null;
  const { loop, claims, runsStarted } = loopOf(t, [local], () => {
    const claimed = queued.splice(0, 1);
    pokeDuringClaim?.();
    pokeDuringClaim = null;
    return claimed;
  });
  loop.start();
  await settle();
  claims.length = 0;

  // A task created just after the claim read the queue: its poke must not be lost to the sleep
  // that follows (with the poll interval of ten minutes, the test would time out).
  pokeDuringClaim = () => {
    queued.push(task('t1'));
    loop.poke();
  };
  loop.poke();
  await runsStarted(1);
  t.same(claims, ['local 2', 'local 2']);
});

t.test('a slot that comes free pokes the loop, which claims for it', async (t) => {
  const queued = [task('t1'), task('t2')];
  const local = lane('local', 1);
  const { loop, claims, runs, runsStarted } = loopOf(t, [local], () => queued.splice(0, 1));
  loop.start();
  await runsStarted(1);
  await settle();
  t.same(claims, ['local 1'], 'the one slot is full: no claim until it frees');

  runs[0].finish();
  await runsStarted(2);
  t.same(claims, ['local 1', 'local 1']);
  t.equal(runs[1].task.id, 't2');
});

t.test('a poke for some lanes claims for those alone', async (t) => {
  const local = lane('local', 2);
  const gemini = lane('gemini', 4);
  const { loop, claims } = loopOf(t, [local, gemini], () => []);
  loop.start();
  await settle();
  claims.length = 0;

  // A task created for a model that only gemini runs: the local lane has nothing to find.
  loop.poke([gemini]);
  await settle();
  t.same(claims, ['gemini 4']);
});

t.test('a slot that comes free claims for its own lane alone', async (t) => {
  const queued = [task('t1')];
  const local = lane('local', 1);
  const gemini = lane('gemini', 4);
  const { loop, claims, runs, runsStarted } = loopOf(t, [local, gemini], (l) =>
    l === local ? queued.splice(0, 1) : [],
  );
  loop.start();
  await runsStarted(1);
  await settle();
  claims.length = 0;

  runs[0].finish();
  await settle();
  t.same(claims, ['local 1']);
});

t.test('the poll interval claims for every lane, poked or not', async (t) => {
  const local = lane('local', 2);
  const gemini = lane('gemini', 4);
  // Something no poke tells of (another process's freed slot, a task whose run_after came) is
  // found by the poll: here 20 ms, waited for through the claims it makes, not slept.
  const { loop, claims, claimsMade } = loopOf(t, [local, gemini], () => [], 20);
  loop.start();
  await claimsMade(2);
  t.same(claims.slice(0, 2), ['local 2', 'gemini 4'], 'the start');
  await claimsMade(4);
  t.same(claims.slice(2, 4), ['local 2', 'gemini 4'], 'the first poll, with no poke between');
});
