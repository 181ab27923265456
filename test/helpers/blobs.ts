import { readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Test } from 'tap';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import type { BlobStore } from '../../src/blobs/port.js';

/**
 * Where tests get their blob store, as test/helpers/store.ts gives stores: the contract suite runs
 * over every adapter, and the HTTP and worker tests take theirs from here (TEST_BLOBS=s3 runs
 * them on s3rver; the *-s3.test.ts files do that inside `npm test`).
 */
export type BlobKind = 'fs' | 's3';

export interface OpenedTestBlobs {
  blobs: BlobStore;
  /** The environment a process (the CLI) needs to open the same blobs, beside DATA_DIR. */
  env: Record<string, string>;
  /** Every blob key stored, sorted: what a test checks that nothing is left behind with. */
  storedKeys(): Promise<string[]>;
}

export interface BlobAdapterUnderTest {
  kind: BlobKind;
  /** An empty blob store of the test's own, gone when t ends: under dataDir/blobs, or a fresh s3rver. */
  open(t: Test, dataDir: string): Promise<OpenedTestBlobs>;
}

const fs: BlobAdapterUnderTest = {
  kind: 'fs',
  async open(_t, dataDir) {
    const root = join(dataDir, 'blobs');
    return {
      blobs: new FsBlobStore(root),
      env: {},
      async storedKeys() {
        const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
        return entries
          .filter((entry) => entry.isFile())
          .map((entry) => relative(root, join(entry.parentPath, entry.name)))
          .filter((key) => !key.startsWith('.'))
          .sort();
      },
    };
  },
};

const s3: BlobAdapterUnderTest = {
  kind: 's3',
  async open(t) {
    // Loaded here, not at the top: the S3 SDK and s3rver take a fifth of a second to load, and
    // most test files never open S3.
    const [{ ListObjectsV2Command }, { S3BlobStore }, { startTestS3, testS3Client }] = await Promise.all([
      import('@aws-sdk/client-s3'),
      import('../../src/blobs/s3-blob-store.js'),
      import('./s3.js'),
    ]);
    const server = await startTestS3(t);
    const client = testS3Client(t, server);
    return {
      blobs: new S3BlobStore({ client, bucket: server.bucket }),
      env: server.env,
      async storedKeys() {
        const listed = await client.send(new ListObjectsV2Command({ Bucket: server.bucket }));
        return (listed.Contents ?? []).map((object) => object.Key!).sort();
      },
    };
  },
};

export const BLOB_ADAPTERS: readonly BlobAdapterUnderTest[] = [fs, s3];

/** The adapter named by TEST_BLOBS (default fs). */
export function testBlobAdapter(kind = (process.env.TEST_BLOBS ?? 'fs') as BlobKind): BlobAdapterUnderTest {
  const adapter = BLOB_ADAPTERS.find((a) => a.kind === kind);
  if (!adapter) throw new Error(`TEST_BLOBS=${kind}: expected fs or s3`);
  return adapter;
}
