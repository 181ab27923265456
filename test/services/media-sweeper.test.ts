import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import type { BlobStore } from '../../src/blobs/port.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { MediaService, ORPHAN_BLOB_GRACE_MS, storeMedia } from '../../src/services/media-service.js';
import { sweepExpiredMedia } from '../../src/services/media-sweeper.js';
import type { MediaStore } from '../../src/store/port.js';
import { testStoreAdapter } from '../helpers/store.js';

const HOUR_MS = 3600_000;
const START = new Date('2030-01-01T00:00:00.000Z');
const image = {
  bytes: Buffer.from('pretend these are image bytes'),
  contentType: 'image/png' as const,
  width: 1,
  height: 1,
  sizeBytes: 29,
  sha256: 'ab'.repeat(32),
};

async function setup(t: Test) {
  const dir = t.testdir({});
  const { store } = await testStoreAdapter().open(t);
  const blobs = new FsBlobStore(join(dir, 'blobs'));
  let current = START.getTime();
  const clock = {
    now: () => new Date(current),
    advance: (ms: number) => {
      current += ms;
    },
  };
  const { account } = await createAccountWithKey(store, { name: 'sweeper', tokens: 0, now: START });
  const blobExists = (key: string) => existsSync(join(dir, 'blobs', key));
  const put = (retentionMs: number) =>
    storeMedia(
      { store: store.media, blobs, now: clock.now },
      { accountId: account.id, source: 'upload', taskId: null, image, retentionMs },
    );
  return { dir, store, blobs, clock, accountId: account.id, blobExists, put };
}

t.test('media live until expires_at, then the sweep deletes row and blob', async (t) => {
  const s = await setup(t);
  const media = await s.put(2 * HOUR_MS);
  t.ok(s.blobExists(media.blobKey));

  s.clock.advance(2 * HOUR_MS - 1);
  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() }), {
    expiredMedia: 0,
    blobsDeleted: 0,
  });
  t.ok(await s.store.media.getMedia(s.accountId, media.id, s.clock.now()), 'still readable a millisecond before');
  t.ok(s.blobExists(media.blobKey));

  s.clock.advance(1);
  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() }), {
    expiredMedia: 1,
    blobsDeleted: 1,
    more: false,
  });
  t.equal(await s.store.media.getMediaById(media.id, new Date(0)), null, 'the row is gone, whatever the clock');
  t.notOk(s.blobExists(media.blobKey), 'the blob is gone');
});

t.test('a sweep takes at most batchSize and says when there is more', async (t) => {
  const s = await setup(t);
  const media = [];
  for (let i = 0; i < 5; i++) media.push(await s.put(HOUR_MS));
  const fresh = await s.put(10 * HOUR_MS);
  s.clock.advance(HOUR_MS);

  const first = await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now(), batchSize: 2 });
  t.match(first, { expiredMedia: 2, blobsDeleted: 2, more: true });
  let passes = 1;
  while ((await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now(), batchSize: 2 })).more)
    passes += 1;
  t.ok(passes <= 4, `finished in ${passes + 1} passes`);
  for (const m of media) t.notOk(s.blobExists(m.blobKey));
  t.ok(s.blobExists(fresh.blobKey), 'an unexpired media is untouched');
  t.ok(await s.store.media.getMedia(s.accountId, fresh.id, s.clock.now()));
});

t.test('a blob put by a writer that died before inserting its row is swept after the grace period', async (t) => {
  const s = await setup(t);
  const dying: MediaStore = Object.assign(Object.create(s.store.media) as MediaStore, {
    insertMedia: async () => {
      throw new Error('the process died here');
    },
  });
  await t.rejects(
    storeMedia(
      { store: dying, blobs: s.blobs, now: s.clock.now },
      { accountId: s.accountId, source: 'upload', taskId: null, image, retentionMs: HOUR_MS },
    ),
  );
  const [orphanKey] = await s.store.media.listDueBlobDeletions(new Date(8.64e15), 10);
  t.ok(orphanKey && s.blobExists(orphanKey), 'the blob was written but no row points at it');

  s.clock.advance(ORPHAN_BLOB_GRACE_MS - 1);
  await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() });
  t.ok(s.blobExists(orphanKey), 'kept during the grace period (its writer might still be working)');

  s.clock.advance(1);
  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() }), { blobsDeleted: 1 });
  t.notOk(s.blobExists(orphanKey));
  t.same(await s.store.media.listDueBlobDeletions(new Date(8.64e15), 10), [], 'nothing left queued');
});

t.test('a writer too late to claim its blob back inserts no row', async (t) => {
  const s = await setup(t);
  let calls = 0;
  // The second reading of the clock (at insert) comes after the grace period.
  const lateNow = () => (calls++ === 0 ? s.clock.now() : new Date(s.clock.now().getTime() + ORPHAN_BLOB_GRACE_MS));
  await t.rejects(
    storeMedia(
      { store: s.store.media, blobs: s.blobs, now: lateNow },
      { accountId: s.accountId, source: 'upload', taskId: null, image, retentionMs: HOUR_MS },
    ),
    /ran out/,
  );
  const [key] = await s.store.media.listDueBlobDeletions(new Date(8.64e15), 10);
  t.ok(key, 'the blob is still queued for deletion');
  t.equal(await s.store.media.getMediaById(key.replace('media/', ''), new Date(0)), null, 'and no row points at it');
});

t.test('a blob that cannot be deleted stays queued and goes on a later sweep', async (t) => {
  const s = await setup(t);
  const media = await s.put(HOUR_MS);
  s.clock.advance(HOUR_MS);
  let failing = true;
  const flaky: BlobStore = Object.assign(Object.create(s.blobs) as BlobStore, {
    delete: async (key: string) => {
      if (failing) throw new Error('storage unavailable');
      return s.blobs.delete(key);
    },
  });
  const warnings: unknown[] = [];
  const log = { warn: (details: object) => void warnings.push(details) };

  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: flaky, now: s.clock.now(), log }), {
    expiredMedia: 1,
    blobsDeleted: 0,
    blobFailures: 1,
  });
  t.equal(await s.store.media.getMediaById(media.id, new Date(0)), null, 'the row went at once');
  t.ok(s.blobExists(media.blobKey));
  t.equal(warnings.length, 1, 'the failure was logged');

  failing = false;
  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: flaky, now: s.clock.now(), log }), {
    expiredMedia: 0,
    blobsDeleted: 1,
    blobFailures: 0,
  });
  t.notOk(s.blobExists(media.blobKey));
});

t.test('a delete whose blob removal fails is finished by the sweeper', async (t) => {
  const s = await setup(t);
  const failingBlobs: BlobStore = Object.assign(Object.create(s.blobs) as BlobStore, {
    delete: async () => {
      throw new Error('storage unavailable');
    },
  });
  const warnings: unknown[] = [];
  const service = new MediaService({
    store: s.store.media,
    blobs: failingBlobs,
    now: s.clock.now,
    uploadRetentionMs: HOUR_MS,
    maxPixels: 1000,
    normalizeConcurrency: 1,
    log: { warn: (details) => void warnings.push(details) },
  });
  const media = await s.put(HOUR_MS);
  await service.delete(s.accountId, media.id);
  t.equal(warnings.length, 1);
  t.equal(await s.store.media.getMedia(s.accountId, media.id, s.clock.now()), null, 'the media is gone for the client');
  t.ok(s.blobExists(media.blobKey), 'its blob is not, yet');

  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() }), { blobsDeleted: 1 });
  t.notOk(s.blobExists(media.blobKey));
});

t.test('generated media keep for the retention their writer passes', async (t) => {
  const s = await setup(t);
  const result = await storeMedia(
    { store: s.store.media, blobs: s.blobs, now: s.clock.now },
    { accountId: s.accountId, source: 'generated', taskId: null, image, retentionMs: 30 * 24 * HOUR_MS },
  );
  t.equal(result.expiresAt.getTime() - result.createdAt.getTime(), 30 * 24 * HOUR_MS);
  s.clock.advance(7 * 24 * HOUR_MS);
  await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: s.clock.now() });
  t.ok(s.blobExists(result.blobKey), 'still there after an upload would have gone');
  t.equal((await s.store.media.getMediaById(result.id, s.clock.now()))?.source, 'generated');
});

t.test('spooled upload files left by a crash are removed after an hour', async (t) => {
  const s = await setup(t);
  const tmp = join(s.dir, 'tmp');
  await mkdir(tmp);
  const old = join(tmp, 'upload-old');
  const recent = join(tmp, 'upload-recent');
  await writeFile(old, 'x');
  await writeFile(recent, 'x');
  const now = s.clock.now();
  await utimes(old, new Date(now.getTime() - 2 * HOUR_MS), new Date(now.getTime() - 2 * HOUR_MS));
  await utimes(recent, new Date(now.getTime() - 60_000), new Date(now.getTime() - 60_000));

  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now, uploadTempDir: tmp }), {
    staleTempFiles: 1,
  });
  t.notOk(existsSync(old));
  t.ok(existsSync(recent), 'an upload may still be streaming into it');
});

t.test("housekeeping removes a dead process's spool files at once and leaves a live one's", async (t) => {
  const s = await setup(t);
  const tmp = join(s.dir, 'tmp');
  await mkdir(tmp);
  const child = spawn(process.execPath, ['-e', '']);
  const deadPid = child.pid!;
  await new Promise((resolve) => child.once('exit', resolve));
  const dead = join(tmp, `upload-${hostname()}-${deadPid}-${randomUUID()}`);
  const live = join(tmp, `upload-${hostname()}-${process.pid}-${randomUUID()}`);
  await writeFile(dead, 'x');
  await writeFile(live, 'x');

  t.match(await sweepExpiredMedia({ store: s.store.media, blobs: s.blobs, now: new Date(), uploadTempDir: tmp }), {
    staleTempFiles: 1,
  });
  t.notOk(existsSync(dead), 'a minute old, but its process is gone');
  t.ok(existsSync(live));
});
