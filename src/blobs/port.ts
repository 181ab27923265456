import type { Readable } from 'node:stream';

/**
 * Where media bytes live (local disk or S3). Keys look like `media/<uuid>`.
 * Every adapter must pass test/blobs/blob-store-contract.ts.
 */
export interface BlobStore {
  /**
   * Atomically stores the whole stream/buffer under key; a reader never sees a partial blob.
   * Overwrites. A stream body is always consumed or destroyed, even when put rejects.
   */
  put(key: string, body: Readable | Buffer): Promise<{ sizeBytes: number }>;
  /** null when absent. The stream must be consumed or destroyed by the caller. */
  get(key: string): Promise<{ body: Readable; sizeBytes: number } | null>;
  /** Whole blob in memory (small blobs only, e.g. reference images for the generator). null when absent. */
  getBuffer(key: string): Promise<Buffer | null>;
  /** Idempotent: deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  /** Throws when the store is not usable (readiness probe). */
  ping(): Promise<void>;
  /**
   * Removes what writes interrupted by a crash left behind (never a finished blob, never a write
   * still running elsewhere); the housekeeper calls it. Returns how many leftovers went.
   */
  sweepTemp(): Promise<number>;
}

/** A key that could escape the store's root or name something other than a blob: a bug, not user input. */
export class InvalidBlobKeyError extends Error {
  readonly code = 'invalid_blob_key';
  constructor(readonly key: string) {
    super(`invalid blob key: ${JSON.stringify(key.slice(0, 100))}`);
    this.name = 'InvalidBlobKeyError';
  }
}

const MAX_KEY_LENGTH = 512;
// Segments are separated by single slashes and may not start with a dot, which rules out
// `.`, `..` and adapter-private names such as the fs store's `.tmp` directory.
const VALID_KEY = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(?:\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;

/** Same rules for every adapter, so a key that works on disk also works on S3 and vice versa. */
export function assertValidBlobKey(key: string): void {
  if (typeof key !== 'string' || key.length > MAX_KEY_LENGTH || !VALID_KEY.test(key)) {
    throw new InvalidBlobKeyError(String(key));
  }
}
