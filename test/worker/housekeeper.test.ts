import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import t from 'tap';
import { Housekeeper } from '../../src/worker/housekeeper.js';
import { newAccountWithTokens, openTestRuntime } from '../helpers/worker.js';

t.test('a housekeeping pass removes blob writes abandoned by a crash, and leaves a fresh one alone', async (t) => {
  const deps = await openTestRuntime(t);
  const tempDir = `${deps.dir}/blobs/.tmp`;
  await mkdir(tempDir, { recursive: true });
  await writeFile(`${tempDir}/abandoned`, 'half a blob');
  const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
  await utimes(`${tempDir}/abandoned`, twoHoursAgo, twoHoursAgo);
  await writeFile(`${tempDir}/in-progress`, 'being written by another process');

  await new Housekeeper({ store: deps.store, blobs: deps.blobs, intervalMs: 60_000 }).runOnce();
  t.same(await readdir(tempDir), ['in-progress']);
});

t.test('a housekeeping pass deletes every expired idempotency key, a bounded slice per store call', async (t) => {
  const deps = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(deps.store, 0);
  const twoDaysAgo = new Date(Date.now() - 48 * 3600_000);
  const claims = Array.from({ length: 2500 }, (_, i) =>
    deps.store.idempotencyKeys.claimIdempotencyKey({
      accountId,
      key: `k${i}`,
      fingerprint: 'f',
      leaseToken: 'l',
      now: twoDaysAgo,
      leaseMs: 60_000,
      ttlMs: 86_400_000,
    }),
  );
  await Promise.all(claims);
  const fresh = {
    accountId,
    key: 'fresh',
    fingerprint: 'f',
    leaseToken: 'l',
    now: new Date(),
    leaseMs: 60_000,
    ttlMs: 86_400_000,
  };
  await deps.store.idempotencyKeys.claimIdempotencyKey(fresh);

  const slices: number[] = [];
  const deleteExpired = deps.store.idempotencyKeys.deleteExpiredIdempotencyKeys.bind(deps.store.idempotencyKeys);
  deps.store.idempotencyKeys.deleteExpiredIdempotencyKeys = async (now, limit) => {
    const deleted = await deleteExpired(now, limit);
    slices.push(deleted);
    return deleted;
  };
  await new Housekeeper({ store: deps.store, blobs: deps.blobs, intervalMs: 60_000 }).runOnce();
  t.same(slices, [1000, 1000, 500], 'three slices, the last one short');
  t.same(
    await deps.store.idempotencyKeys.claimIdempotencyKey({ ...fresh, fingerprint: 'other' }),
    { outcome: 'fingerprint_mismatch' },
    'the unexpired key stays',
  );
});
