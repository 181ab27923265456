import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { Test } from 'tap';
import { createS3Client, S3BlobStore } from '../../src/blobs/s3-blob-store.js';
import { startCuttingProxy } from './cutting-proxy.js';

/** s3rver's fixed credentials: it checks every request's signature against them. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;
export const TEST_BUCKET = 'imagegen-test';
const REGION = 'us-east-1';

export interface RunningS3 {
  endpoint: string;
  bucket: string;
  /** The environment a process (the CLI) needs to use this bucket, with its credentials. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * An S3-compatible server (s3rver) on a free loopback port with a bucket, in a temporary
 * directory of its own; removed when stopped. s3rver lacks ListMultipartUploads and
 * AbortMultipartUpload, which lib-storage and the blob store's sweep need: they are added here,
 * speaking S3's documented XML over s3rver's own record of unfinished uploads.
 */
export async function startS3rver(options: { bucket?: string; port?: number } = {}): Promise<RunningS3> {
  const bucket = options.bucket ?? TEST_BUCKET;
  const directory = await mkdtemp(join(tmpdir(), 'imagegen-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: options.port ?? 0,
    silent: true,
    directory,
    vhostBuckets: false,
    configureBuckets: [{ name: bucket }],
  });
  // Before the router, which answers both calls with NotImplemented / MethodNotAllowed.
  server.middleware.splice(server.middleware.length - 1, 0, multipartUploadsMiddleware(server));
  keepReadersOfReplacedObjects(server);
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: s3rverEnv(endpoint, bucket),
    async close() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/** The environment of a service process whose blobs are in that s3rver's bucket. */
export function s3rverEnv(endpoint: string, bucket = TEST_BUCKET): Record<string, string> {
  return {
    BLOB_STORE: 's3',
    S3_ENDPOINT: endpoint,
    S3_BUCKET: bucket,
    S3_REGION: REGION,
    S3_FORCE_PATH_STYLE: 'true',
    AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
  };
}

/** s3rver for one test: stopped and removed in its teardown. */
export async function startTestS3(t: Test): Promise<RunningS3> {
  const s3 = await startS3rver();
  t.teardown(() => s3.close());
  return s3;
}

/** A client of that server (path style, its credentials), closed with the test. */
export function testS3Client(t: Test, s3: RunningS3) {
  const client = createS3Client({
    region: REGION,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: { ...S3RVER_CREDENTIALS },
  });
  t.teardown(() => client.destroy());
  return client;
}

/**
 * s3rver rewrites an object's file in place, so a GET already streaming it would read a mix of
 * both versions; S3 serves such a reader the version it started with. Unlinking the file before
 * it is written again gives the same: the reader keeps the old file open to its end.
 */
function keepReadersOfReplacedObjects(server: S3rver): void {
  const store = server.store;
  const putObject = store.putObject.bind(store);
  store.putObject = async (object) => {
    await rm(store.getResourcePath(object.bucket, object.key, 'object'), { force: true });
    return putObject(object);
  };
}

interface KoaContext {
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  status: number;
  body: unknown;
  type: string;
}

const MAX_UPLOADS = 1000;

/**
 * ListMultipartUploads (GET /bucket?uploads, with prefix, key-marker, upload-id-marker and
 * max-uploads) and AbortMultipartUpload (DELETE /bucket/key?uploadId=…) over the directories
 * where s3rver keeps unfinished uploads (one per upload id, holding the key and the parts).
 * Path-style requests only; signatures are not checked for these two.
 */
function multipartUploadsMiddleware(server: S3rver) {
  const uploadsDir = (bucket: string) => server.store.getResourcePath(bucket, undefined, 'uploads');
  return async (ctx: KoaContext, next: () => Promise<void>) => {
    // Path style: /bucket or /bucket/ for the bucket, /bucket/key for an object.
    const [bucket, ...keyParts] = ctx.path.slice(1).replace(/\/$/, '').split('/').map(decodeURIComponent);
    if (ctx.method === 'GET' && keyParts.length === 0 && 'uploads' in ctx.query) {
      const text = (name: string) => (typeof ctx.query[name] === 'string' ? (ctx.query[name] as string) : '');
      const prefix = text('prefix');
      const keyMarker = text('key-marker');
      const uploadIdMarker = text('upload-id-marker');
      const maxUploads = Number(text('max-uploads') || MAX_UPLOADS);
      const uploads = (await listUploads(uploadsDir(bucket)))
        .filter((u) => u.key.startsWith(prefix))
        .filter(
          (u) => u.key > keyMarker || (u.key === keyMarker && uploadIdMarker !== '' && u.uploadId > uploadIdMarker),
        )
        .sort((a, b) => (a.key === b.key ? compare(a.uploadId, b.uploadId) : compare(a.key, b.key)));
      const page = uploads.slice(0, maxUploads);
      const truncated = uploads.length > page.length;
      const last = page.at(-1);
      ctx.status = 200;
      ctx.type = 'application/xml';
      ctx.body = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
        `<Bucket>${xml(bucket)}</Bucket><KeyMarker>${xml(keyMarker)}</KeyMarker>`,
        `<UploadIdMarker>${xml(uploadIdMarker)}</UploadIdMarker><Prefix>${xml(prefix)}</Prefix>`,
        truncated && last
          ? `<NextKeyMarker>${xml(last.key)}</NextKeyMarker><NextUploadIdMarker>${xml(last.uploadId)}</NextUploadIdMarker>`
          : '',
        `<MaxUploads>${maxUploads}</MaxUploads><IsTruncated>${truncated}</IsTruncated>`,
        ...page.map(
          (u) =>
            `<Upload><Key>${xml(u.key)}</Key><UploadId>${xml(u.uploadId)}</UploadId>` +
            `<Initiated>${u.initiated.toISOString()}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`,
        ),
        '</ListMultipartUploadsResult>',
      ].join('');
      return;
    }
    const uploadId = ctx.query.uploadId;
    if (ctx.method === 'DELETE' && keyParts.length > 0 && typeof uploadId === 'string') {
      const dir = join(uploadsDir(bucket), uploadId);
      const key = await readFile(join(dir, 'key'), 'utf8').catch(() => null);
      if (key !== keyParts.join('/')) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message></Error>`;
        return;
      }
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      ctx.body = null;
      return;
    }
    await next();
  };
}

/** Unfinished uploads of a bucket; an upload's start is when s3rver wrote its key file. */
async function listUploads(dir: string): Promise<{ key: string; uploadId: string; initiated: Date }[]> {
  const ids = await readdir(dir).catch(() => [] as string[]);
  const uploads = await Promise.all(
    ids.map(async (uploadId) => {
      try {
        const keyFile = join(dir, uploadId, 'key');
        return { key: await readFile(keyFile, 'utf8'), uploadId, initiated: (await stat(keyFile)).mtime };
      } catch {
        return null; // completed or aborted meanwhile
      }
    }),
  );
  return uploads.filter((u) => u !== null);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function xml(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * s3rver behind a loopback proxy that can cut it (test/helpers/cutting-proxy.ts), and a blob store
 * that reaches it only through the proxy: for the tests of an S3 outage.
 */
export async function s3BehindCuttingProxy(t: Test) {
  const s3 = await startTestS3(t);
  const proxy = await startCuttingProxy(t, { host: '127.0.0.1', port: Number(new URL(s3.endpoint).port) });
  const client = testS3Client(t, { ...s3, endpoint: `http://${proxy.address}` });
  return { proxy, blobs: new S3BlobStore({ client, bucket: s3.bucket }) };
}
