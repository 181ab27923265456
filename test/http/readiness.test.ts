import { closeRateLimitCounters } from '../../src/runtime.js';
import { statfsSync, symlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import t, { type Test } from 'tap';
import { IDEMPOTENCY_LEASE_MS } from '../../src/services/idempotency.js';
import type { Store } from '../../src/store/port.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { buildTestApp } from '../helpers/app.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { noisyImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { needsRedis, REDIS_URL } from '../helpers/redis.js';
import type { StoreAdapterUnderTest } from '../helpers/store.js';
import {
  assertOnlyServedOrUnavailable,
  retryRefusedCreates,
  startSteadyLoad,
  viaInject,
} from '../helpers/steady-load.js';
import { canMountTmpfs, mountTmpfs } from '../helpers/tmpfs.js';
import { testWorker } from '../helpers/worker.js';

/**
 * /readyz tells a load balancer whether this node can accept work, and a full disk or a Redis
 * away is what clients see as the issue says: 503 with Retry-After for the work the node cannot
 * do, never 500 or 400, and recovery without a restart.
 */

// Each test builds an app of its own: each has a configuration of its own (READY_MIN_FREE_MB, a
// Redis behind a proxy that the test cuts, a spool or a database on a filesystem the test fills, a
// clock it moves), and the load tests run a worker that claims every account's tasks.
// Apart as they are, they run at once: most of their time is the load's pace and the leases
// they wait out, not work.
t.jobs = 5;
const noTmpfs = canMountTmpfs() ? false : 'this process may not mount a tmpfs (needs root or CAP_SYS_ADMIN)';

type App = Awaited<ReturnType<typeof buildTestApp>>['app'];

async function metrics(app: App): Promise<string> {
  return (await app.inject({ method: 'GET', url: '/metrics' })).payload;
}

/** /readyz once `condition` holds of its answer (asked every 50 ms, at most `ms`), or its last answer. */
async function untilReadyz(app: App, condition: (seen: Awaited<ReturnType<typeof readyz>>) => boolean, ms = 5_000) {
  const end = Date.now() + ms;
  let seen = await readyz(app);
  while (!condition(seen) && Date.now() < end) {
    await delay(50);
    seen = await readyz(app);
  }
  return seen;
}

/** Each accepted create is one task debited once, and nothing else was debited. */
async function assertChargedPerAcceptance(t: Test, store: Store, accountId: string, accepted: string[]) {
  t.equal(new Set(accepted).size, accepted.length, 'no task id answered twice');
  const { debit } = await store.accounts.ledgerTotals(accountId);
  t.equal(debit, accepted.length * 25, `${accepted.length} accepted creates, each debited once`);
  await assertLedgerInvariant(t, store, accountId);
}

/** The tasks' statuses, counted, once none is waiting or running (or after `ms`). */
async function untilTerminal(store: Store, ids: string[], ms = 30_000): Promise<Record<string, number>> {
  const end = Date.now() + ms;
  let statuses: string[] = [];
  do {
    statuses = (await Promise.all(ids.map((id) => store.tasks.getTaskById(id)))).map((task) => String(task?.status));
    if (statuses.every((status) => status === 'COMPLETED' || status === 'FAILED')) break;
    await delay(100);
  } while (Date.now() < end);
  const counted: Record<string, number> = {};
  for (const status of statuses) counted[status] = (counted[status] ?? 0) + 1;
  return counted;
}

async function readyz(app: Awaited<ReturnType<typeof buildTestApp>>['app']) {
  const response = await app.inject({ method: 'GET', url: '/readyz' });
  return { status: response.statusCode, body: response.json() };
}

t.test('every dependency answering: 200 with each one ok', async (t) => {
  const { app } = await buildTestApp(t);
  t.same(await readyz(app), {
    status: 200,
    body: { status: 'ok', checks: { store: 'ok', blobs: 'ok', disk: 'ok', rate_limits: 'ok' } },
  });
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).payload;
  t.match(metrics, /imagegen_dependency_up\{dependency="disk"\} 1/);
});

t.test('less free space under DATA_DIR than READY_MIN_FREE_MB: 503, disk failing', async (t) => {
  const { app } = await buildTestApp(t, { READY_MIN_FREE_MB: '1048576' });
  t.match(await readyz(app), {
    status: 503,
    body: { status: 'unavailable', checks: { disk: 'failing', store: 'ok' } },
  });
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).payload;
  t.match(metrics, /imagegen_dependency_up\{dependency="disk"\} 0/);
});

t.test(
  'Redis cut under load: every request served (fail-open), /readyz 200 rate_limits degraded, the client reconnects',
  await needsRedis(),
  async (t) => {
    const redis = new URL(REDIS_URL);
    const proxy = await startCuttingProxy(t, { host: redis.hostname, port: Number(redis.port || 6379) });
    const { app, store, blobs, newAccount, rateLimitRedis } = await buildTestApp(t, {
      REDIS_URL: `redis://${proxy.address}`,
      MAX_ACTIVE_TASKS: '100000',
    });
    testWorker(t, { store, blobs }, { concurrency: 2 }).start();
    const accounts = await Promise.all([newAccount(1_000_000), newAccount(1_000_000), newAccount(1_000_000)]);
    const load = startSteadyLoad(viaInject(app), accounts, { png: await noisyImage(32, 32).png().toBuffer() });
    t.teardown(() => load.stop());
    await load.until(() => load.count('create', 202) >= 3 && load.count('upload', 201) >= 3);
    t.match(await readyz(app), { status: 200, body: { checks: { rate_limits: 'ok' } } });

    proxy.cut(60_000);
    // The client learns of the reset from its socket, a moment later.
    t.match(await untilReadyz(app, (seen) => seen.body.checks.rate_limits === 'degraded'), {
      status: 200,
      body: { status: 'ok', checks: { rate_limits: 'degraded', store: 'ok' } },
    });
    t.match(await metrics(app), /imagegen_dependency_up\{dependency="rate_limits"\} 0/);
    const servedBefore = load.count('create', 202) + load.count('upload', 201) + load.count('read', 200);
    // A steady stream while Redis is away: every kind served, without the shared counters.
    const creates = load.count('create', 202);
    const uploads = load.count('upload', 201);
    await load.until(() => load.count('create', 202) >= creates + 15 && load.count('upload', 201) >= uploads + 15);
    t.ok(load.count('read', 200) + load.count('create', 202) + load.count('upload', 201) > servedBefore);

    proxy.cut(0);
    // ioredis reconnects by itself (its backoff is at most 2 s): no restart, no new client.
    t.match(await untilReadyz(app, (seen) => seen.body.checks.rate_limits === 'ok', 15_000), {
      status: 200,
      body: { checks: { rate_limits: 'ok' } },
    });
    t.match(await metrics(app), /imagegen_dependency_up\{dependency="rate_limits"\} 1/);
    t.ok(proxy.connections >= 2, 'a new connection to Redis was made through the proxy');
    const after = load.count('create', 202);
    await load.until(() => load.count('create', 202) >= after + 3);

    const report = await load.stop();
    assertOnlyServedOrUnavailable(t, report);
    t.same(
      Object.values(report.answers).flatMap((byStatus) => [...byStatus.keys()].filter((s) => s >= 300)),
      [],
      'nothing refused at all: the limits fail open',
    );
    const accepted = [...report.accepted.values()].flat();
    t.same(await untilTerminal(store, accepted), { COMPLETED: accepted.length }, 'every accepted task COMPLETED');
    for (const { accountId } of accounts)
      await assertChargedPerAcceptance(t, store, accountId, report.accepted.get(accountId)!);
    // The Redis client quits, and its connection is gone before the proxy closes (the proxy's
    // teardown resetting a connection its client is closing left the test process hanging).
    await app.close();
    await closeRateLimitCounters(rateLimitRedis);
    await proxy.drained();
  },
);

/** A clock that the test moves on: the real time plus `offset` ms. */
function shiftableClock() {
  const clock = { offset: 0, now: () => new Date(Date.now() + clock.offset) };
  return clock;
}

/** Fills the filesystem of `dir` with one file, leaving about `leaveBytes` free; returns its path. */
function fillLeaving(dir: string, leaveBytes: number): string {
  const filler = join(dir, 'filler');
  const { bavail, bsize } = statfsSync(dir);
  writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - leaveBytes)));
  return filler;
}

t.test(
  'the upload spool disk full under load: uploads 503 with Retry-After (never 400 or 500), creates and reads served; room again: uploads 201',
  { skip: noTmpfs },
  async (t) => {
    const clock = shiftableClock();
    const { app, store, blobs, dataDir, newAccount } = await buildTestApp(
      t,
      { MAX_ACTIVE_TASKS: '100000' },
      { now: clock.now },
    );
    testWorker(t, { store, blobs }, { concurrency: 2 }).start();
    // The spool (DATA_DIR/tmp) on a 1 MiB filesystem of its own.
    const spool = mountTmpfs(t, 1024 * 1024)!;
    await rm(join(dataDir, 'tmp'), { recursive: true, force: true });
    symlinkSync(spool, join(dataDir, 'tmp'));
    const png = await noisyImage(160, 160).png().toBuffer();
    const accounts = await Promise.all([newAccount(1_000_000), newAccount(1_000_000), newAccount(1_000_000)]);
    const load = startSteadyLoad(viaInject(app), accounts, { png });
    t.teardown(() => load.stop());
    await load.until(() => load.count('upload', 201) >= 3);

    // Less room than half an upload.
    const filler = fillLeaving(spool, png.length / 2);
    await load.until(() => load.count('upload', 503) >= 5);
    t.match(await readyz(app), { status: 503, body: { status: 'unavailable', checks: { disk: 'failing' } } });
    const creates = load.count('create', 202);
    const reads = load.count('read', 200);
    await load.until(() => load.count('create', 202) >= creates + 3 && load.count('read', 200) >= reads + 3);

    await rm(filler);
    const uploads = load.count('upload', 201);
    await load.until(() => load.count('upload', 201) >= uploads + 5);
    t.pass('uploads succeed again once there is room, without a restart');
    const report = await load.stop();
    assertOnlyServedOrUnavailable(t, report);
    t.equal(load.count('create', 503) + load.count('read', 503), 0, 'only uploads need the spool');

    // /readyz remembers the failed write for a minute (a full disk can look free a moment later).
    t.match(await readyz(app), { status: 503, body: { checks: { disk: 'failing' } } });
    clock.offset += 61_000;
    t.match(await readyz(app), { status: 200, body: { checks: { disk: 'ok' } } });
    const accepted = [...report.accepted.values()].flat();
    t.same(await untilTerminal(store, accepted), { COMPLETED: accepted.length }, 'every accepted task COMPLETED');
    for (const { accountId } of accounts)
      await assertChargedPerAcceptance(t, store, accountId, report.accepted.get(accountId)!);
  },
);

t.test(
  'the embedded database disk full under load: creates and uploads 503, never 500, nothing charged twice; room again: served, the refused creates retried once',
  { skip: noTmpfs },
  async (t) => {
    const disk = mountTmpfs(t, 8 * 1024 * 1024)!;
    const sqliteOnDisk: StoreAdapterUnderTest = {
      kind: 'sqlite',
      async open(t) {
        const store = new SqliteStore(join(disk, 'imagegen.sqlite'));
        await store.migrate();
        t.teardown(() => store.close());
        return { store, reopen: async () => store, env: { DATA_DIR: disk } };
      },
    };
    const clock = shiftableClock();
    const { app, store, blobs, newAccount } = await buildTestApp(
      t,
      { DATA_DIR: disk, READY_MIN_FREE_MB: '1', MAX_ACTIVE_TASKS: '100000' },
      { storeAdapter: sqliteOnDisk, now: clock.now },
    );
    // A worker on the same database claims and completes the tasks, through the full disk too.
    testWorker(t, { store, blobs }, { concurrency: 2, retryBaseMs: 100 }).start();
    const accounts = await Promise.all([newAccount(1_000_000), newAccount(1_000_000), newAccount(1_000_000)]);
    const load = startSteadyLoad(viaInject(app), accounts, { png: await noisyImage(32, 32).png().toBuffer() });
    t.teardown(() => load.stop());
    await load.until(() => load.count('create', 202) >= 3);
    t.equal((await readyz(app)).status, 200);

    // Everything but a few pages of the filesystem taken by another file.
    const filler = fillLeaving(disk, 64 * 1024);
    await load.until(() => load.count('create', 503) >= 15 && load.count('upload', 503) >= 5);
    t.match(await readyz(app), { status: 503, body: { checks: { disk: 'failing' } } });

    await rm(filler);
    const creates = load.count('create', 202);
    const uploads = load.count('upload', 201);
    await load.until(() => load.count('create', 202) >= creates + 3 && load.count('upload', 201) >= uploads + 3);
    t.pass('creates and uploads served again once there is room, without a restart');
    const report = await load.stop();
    assertOnlyServedOrUnavailable(t, report);

    // Each refused create retried with its Idempotency-Key once its lease would have lapsed (a key
    // left in progress by the failure waits no longer than that): a task, at most once per key.
    clock.offset += IDEMPOTENCY_LEASE_MS + 1;
    const retried = await retryRefusedCreates(viaInject(app), accounts, report);
    t.same(retried.failures, [], 'every refused create served on its retry');
    t.equal(retried.inProgressAnswers, 0, 'no key waits past its lease');
    const tasks = accounts.map(({ accountId }) => [
      ...report.accepted.get(accountId)!,
      ...retried.tasks.get(accountId)!,
    ]);
    t.same(await untilTerminal(store, tasks.flat()), { COMPLETED: tasks.flat().length }, 'every task COMPLETED');
    for (const [i, { accountId }] of accounts.entries())
      await assertChargedPerAcceptance(t, store, accountId, tasks[i]!);
    clock.offset += 61_000;
    t.match(await readyz(app), { status: 200, body: { checks: { disk: 'ok' } } });
  },
);
