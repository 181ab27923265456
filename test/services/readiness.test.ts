// Not in the PostgreSQL pass: the readiness checks over fake dependencies.
import t from 'tap';
import { checkReadiness, DiskSpace } from '../../src/services/readiness.js';

t.test('a degraded dependency leaves the node ready; a failing one does not', async (t) => {
  const ok = async () => 'ok' as const;
  const degraded = async () => 'degraded' as const;
  const failing = async (): Promise<'ok'> => {
    throw new Error('connection refused');
  };
  t.match(await checkReadiness({ store: ok, rate_limits: degraded }), {
    ready: true,
    checks: { store: 'ok', rate_limits: 'degraded' },
  });
  const down = await checkReadiness({ store: failing, rate_limits: degraded });
  t.match(down, { ready: false, checks: { store: 'failing', rate_limits: 'degraded' } });
  t.match(down.causes.store, { message: 'connection refused' }, 'the cause, for the log');
});

t.test('the disk fails below its free-space threshold, and for a while after a write found it full', async (t) => {
  let clock = 0;
  const disk = (minFreeBytes: number) =>
    new DiskSpace({ path: t.testdirName, minFreeBytes, fullForMs: 60_000, now: () => new Date(clock) });
  t.testdir({});
  t.equal(await disk(0).check(), 'ok');
  await t.rejects(disk(Number.MAX_SAFE_INTEGER).check(), /bytes free/, 'below the threshold');

  const full = disk(0);
  full.noteFull();
  clock += 59_000;
  await t.rejects(full.check(), /full/, 'still failing 59 s after the failed write');
  clock += 1_000;
  t.equal(await full.check(), 'ok', 'ok again 60 s after it');
});
