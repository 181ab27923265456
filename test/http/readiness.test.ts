import { statfsSync, symlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { buildTestApp } from '../helpers/app.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { noisyImage } from '../helpers/images.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { needsRedis, REDIS_URL } from '../helpers/redis.js';
import type { StoreAdapterUnderTest } from '../helpers/store.js';
import { canMountTmpfs, mountTmpfs } from '../helpers/tmpfs.js';

/**
 * /readyz tells a load balancer whether this node can accept work, and a full disk or a Redis
 * away is what clients see as the issue says: 503 with Retry-After for the work the node cannot
 * do, never 500 or 400, and recovery without a restart.
 */

const CREATE = '/api/v1/images/generations';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' };
const noTmpfs = canMountTmpfs() ? false : 'this process may not mount a tmpfs (needs root or CAP_SYS_ADMIN)';

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

t.test('Redis away: rate limits degraded, the node still ready and serving', await needsRedis(), async (t) => {
  const redis = new URL(REDIS_URL);
  const proxy = await startCuttingProxy(t, { host: redis.hostname, port: Number(redis.port || 6379) });
  const { app, newAccount } = await buildTestApp(t, { REDIS_URL: `redis://${proxy.address}` });
  const { auth } = await newAccount(100);
  t.match(await readyz(app), { status: 200, body: { checks: { rate_limits: 'ok' } } });
  proxy.cut(10_000);
  // The client learns of the reset from its socket, a moment later.
  let seen = await readyz(app);
  for (let i = 0; i < 40 && seen.body.checks.rate_limits === 'ok'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    seen = await readyz(app);
  }
  t.match(seen, { status: 200, body: { status: 'ok', checks: { rate_limits: 'degraded' } } });
  const served = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
  t.equal(served.statusCode, 200, 'requests are served without the shared limits');
});

t.test(
  'the upload spool disk full: 503 with Retry-After, not a bad body; /readyz fails the disk',
  { skip: noTmpfs },
  async (t) => {
    const { app, dataDir, newAccount } = await buildTestApp(t);
    const { auth } = await newAccount(100);
    // The spool (DATA_DIR/tmp) on a 256 KiB filesystem; the image is larger.
    const spool = mountTmpfs(t, 256 * 1024)!;
    await rm(join(dataDir, 'tmp'), { recursive: true, force: true });
    symlinkSync(spool, join(dataDir, 'tmp'));
    const png = await noisyImage(600, 600).png().toBuffer();
    t.ok(png.length > 256 * 1024, `a ${png.length}-byte upload`);

    const request = multipartRequest([filePart(png, { filename: 'big.png', contentType: 'image/png' })]);
    const response = await app.inject({
      method: 'POST',
      url: '/api/v1/media',
      payload: request.payload,
      headers: { ...auth, ...request.headers },
    });
    t.equal(response.statusCode, 503);
    t.equal(response.headers['retry-after'], '5');
    t.equal(response.json().code, 'unavailable');
    t.notMatch(response.payload, /ENOSPC|space/i, 'nothing of the cause');
    t.match(await readyz(app), { status: 503, body: { checks: { disk: 'failing' } } });
  },
);

t.test(
  'the embedded database disk full: creates 503, never 500; room again, creates 202',
  { skip: noTmpfs },
  async (t) => {
    const disk = mountTmpfs(t, 4 * 1024 * 1024)!;
    const sqliteOnDisk: StoreAdapterUnderTest = {
      kind: 'sqlite',
      async open(t) {
        const store = new SqliteStore(join(disk, 'imagegen.sqlite'));
        await store.migrate();
        t.teardown(() => store.close());
        return { store, reopen: async () => store, env: { DATA_DIR: disk } };
      },
    };
    const { app, store, newAccount } = await buildTestApp(t, { DATA_DIR: disk }, { storeAdapter: sqliteOnDisk });
    const { accountId, auth } = await newAccount(1_000_000);
    // Everything but a few pages of the filesystem taken by another file.
    const filler = join(disk, 'filler');
    const { bavail, bsize } = statfsSync(disk);
    writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - 64 * 1024)));

    const statuses = new Map<number, number>();
    let refusedKey = '';
    for (let i = 0; i < 400 && !statuses.has(503); i++) {
      const headers = { ...auth, 'idempotency-key': `full-${i}` };
      const response = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
      statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
      if (response.statusCode === 503) {
        t.equal(response.headers['retry-after'], '5');
        refusedKey = headers['idempotency-key'];
      }
    }
    t.comment(`answers while the disk filled: ${JSON.stringify(Object.fromEntries(statuses))}`);
    t.ok(statuses.has(503), 'a create that found the disk full is 503');
    t.notOk(statuses.has(500), 'never 500');
    t.match(await readyz(app), { status: 503, body: { checks: { disk: 'failing' } } });

    await rm(filler);
    // The refused create, retried with its Idempotency-Key once there is room: one task, one debit.
    const headers = { ...auth, 'idempotency-key': refusedKey };
    const retried = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
    t.equal(retried.statusCode, 202, 'room again: the refused create is served, without a restart');
    const listed = await store.listTasks(accountId, { limit: 100 });
    t.equal(listed.items.length, (statuses.get(202) ?? 0) + 1, 'every 202 is a task, and only those');
    t.equal((await store.ledgerTotals(accountId)).debit, listed.items.length * 25, 'each debited once');
  },
);
