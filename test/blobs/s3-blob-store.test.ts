import { randomUUID } from 'node:crypto';
import {
  CreateMultipartUploadCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import t, { type Test } from 'tap';
import { S3BlobStore } from '../../src/blobs/s3-blob-store.js';
import { mediaBlobKey, ORPHAN_BLOB_GRACE_MS, storeMedia } from '../../src/services/media-service.js';
import { sweepExpiredMedia } from '../../src/services/media-sweeper.js';
import type { MediaStore } from '../../src/store/port.js';
import { startTestS3, testS3Client } from '../helpers/s3.js';
import { testStoreAdapter } from '../helpers/store.js';
import { newAccountWithTokens } from '../helpers/worker.js';
import { blobStoreContract, failingStream, patternStream } from './blob-store-contract.js';

const MiB = 1024 * 1024;

async function openS3Store(t: Test, prefix = '') {
  const s3 = await startTestS3(t);
  const client = testS3Client(t, s3);
  const store = new S3BlobStore({ client, bucket: s3.bucket, prefix });
  const uploadsInProgress = async () =>
    (await client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket }))).Uploads ?? [];
  const objectKeys = async () =>
    ((await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }))).Contents ?? []).map((o) => o.Key);
  return { s3, client, store, uploadsInProgress, objectKeys };
}

t.test('S3BlobStore (on s3rver) passes the BlobStore contract', async (t) => {
  blobStoreContract(t, async (t) => (await openS3Store(t)).store);
});

t.test('S3BlobStore under a prefix passes the BlobStore contract', async (t) => {
  blobStoreContract(t, async (t) => (await openS3Store(t, 'tenant a/ïmages/')).store);
});

t.test('a blob is an object at prefix + key, with spaces and Unicode as they are', async (t) => {
  const { store, objectKeys } = await openS3Store(t, 'env/');
  await store.put('media/a b é', Buffer.from('bytes'));
  t.same(await objectKeys(), ['env/media/a b é']);
});

t.test('a streamed put larger than a part is a multipart upload that leaves nothing unfinished', async (t) => {
  const { store, uploadsInProgress } = await openS3Store(t);
  const key = mediaBlobKey(randomUUID());
  t.same(await store.put(key, patternStream(12 * MiB + 7)), { sizeBytes: 12 * MiB + 7 });
  t.same(await uploadsInProgress(), []);
  t.equal((await store.getBuffer(key))?.length, 12 * MiB + 7);
});

t.test('a stream that fails after some parts were sent aborts its multipart upload', async (t) => {
  const { store, uploadsInProgress, objectKeys } = await openS3Store(t);
  const key = mediaBlobKey(randomUUID());
  await t.rejects(store.put(key, failingStream(11 * MiB)), /source broke/);
  t.same(await uploadsInProgress(), [], 'lib-storage aborted the upload');
  t.same(await objectKeys(), []);
});

t.test('sweepTemp aborts multipart uploads a crash left behind, once they are old enough', async (t) => {
  const { s3, client, store, uploadsInProgress } = await openS3Store(t, 'ours/');
  // Two puts that died after their first part, one of them under another prefix (not ours).
  const startUpload = async (key: string) => {
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: key }));
    await client.send(
      new UploadPartCommand({ Bucket: s3.bucket, Key: key, UploadId, PartNumber: 1, Body: Buffer.alloc(5 * MiB) }),
    );
  };
  await startUpload('ours/media/crashed é');
  await startUpload('theirs/media/x');
  t.equal(await store.sweepTemp(), 0, 'a fresh upload may be a put still running');
  t.equal((await uploadsInProgress()).length, 2);
  t.equal(await store.sweepTemp(0), 1);
  t.same(
    (await uploadsInProgress()).map((u) => u.Key),
    ['theirs/media/x'],
    'only uploads under the prefix are swept',
  );
  t.equal(await store.sweepTemp(0), 0, 'nothing left: idempotent');
});

t.test('sweepTemp follows the listing across pages', async (t) => {
  const { s3, client, store, uploadsInProgress } = await openS3Store(t);
  for (let n = 0; n < 3; n++)
    await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: `media/crash-${n}` }));
  // One upload per page, as S3 pages a long listing.
  client.middlewareStack.add(
    (next) => async (args) => {
      const request = args.request as { query?: Record<string, string> };
      if (request.query && 'uploads' in request.query) request.query['max-uploads'] = '1';
      return next(args);
    },
    { step: 'build', name: 'onePerPage' },
  );
  t.equal(await store.sweepTemp(0), 3);
  t.same(await uploadsInProgress(), []);
});

t.test('ping rejects when the bucket does not exist', async (t) => {
  const s3 = await startTestS3(t);
  await t.rejects(new S3BlobStore({ client: testS3Client(t, s3), bucket: 'no-such-bucket' }).ping());
});

t.test('a missing bucket is an error, not a missing blob', async (t) => {
  const s3 = await startTestS3(t);
  const store = new S3BlobStore({ client: testS3Client(t, s3), bucket: 'no-such-bucket' });
  await t.rejects(store.get('media/x'), { name: 'NoSuchBucket' });
  await t.rejects(store.getBuffer('media/x'), { name: 'NoSuchBucket' });
});

t.test('a presigned GET serves the object with the requested headers, for the requested time', async (t) => {
  const { store } = await openS3Store(t, 'p/');
  const key = 'media/a b é+?#';
  await store.put(key, Buffer.from('image bytes'));
  const options = {
    contentType: 'image/png',
    contentDisposition: 'inline; filename="x.png"',
    cacheControl: 'private, max-age=60',
  };
  const url = await store.presignedGetUrl(key, { ...options, expiresInSeconds: 60 });
  t.equal(new URL(url).searchParams.get('X-Amz-Expires'), '60');
  const response = await fetch(url);
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-type'), 'image/png');
  t.equal(response.headers.get('content-disposition'), options.contentDisposition);
  t.equal(response.headers.get('cache-control'), options.cacheControl);
  t.equal(await response.text(), 'image bytes');
});

/**
 * The intent recorded before the put (store.scheduleBlobDeletion) holds on S3: an object whose
 * writer died before inserting its row is deleted by the sweep once the grace period is over.
 */
t.test('an object put by a writer that crashed before its row is deleted by the sweep', async (t) => {
  const { store: blobs, objectKeys } = await openS3Store(t);
  const { store } = await testStoreAdapter().open(t);
  const accountId = await newAccountWithTokens(store, 0);
  const createdAt = new Date();
  const crashingMedia: MediaStore = Object.assign(Object.create(store.media) as MediaStore, {
    insertMedia: () => Promise.reject(new Error('process killed')),
  });
  const image = {
    bytes: Buffer.from('png bytes'),
    contentType: 'image/png' as const,
    width: 1,
    height: 1,
    sizeBytes: 9,
    sha256: '0'.repeat(64),
  };
  await t.rejects(
    storeMedia(
      { store: crashingMedia, blobs, now: () => createdAt },
      { accountId, source: 'upload', taskId: null, image, retentionMs: 3600_000 },
    ),
    /process killed/,
  );
  t.equal((await objectKeys()).length, 1, 'the object was written');

  await sweepExpiredMedia({
    store: store.media,
    blobs,
    now: new Date(createdAt.getTime() + ORPHAN_BLOB_GRACE_MS - 1000),
  });
  t.equal((await objectKeys()).length, 1, 'kept during the grace period');
  const swept = await sweepExpiredMedia({
    store: store.media,
    blobs,
    now: new Date(createdAt.getTime() + ORPHAN_BLOB_GRACE_MS),
  });
  t.equal(swept.blobsDeleted, 1);
  t.same(await objectKeys(), [], 'no object is left that nothing would delete');
});
