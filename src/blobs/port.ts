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
  /**
   * null when absent. The stream must be consumed or destroyed by the caller. With a range (which
   * the caller has resolved within the blob's size) only those bytes, and sizeBytes is their count.
   */
  get(key: string, range?: ByteRange): Promise<{ body: Readable; sizeBytes: number } | null>;
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
  /**
   * Only adapters whose objects a client can fetch directly (S3): a URL that serves the blob
   * without this service for expiresInSeconds, answering with the given response headers.
   */
  presignedGetUrl?(key: string, options: PresignedGetOptions): Promise<string>;
  /** Only adapters that hold connections (S3): lets them go when the process shuts down. */
  close?(): void;
}

/** Inclusive byte offsets within a blob, as an HTTP Range names them. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface PresignedGetOptions {
  expiresInSeconds: number;
  contentType: string;
  contentDisposition: string;
  cacheControl: string;
}

/** A key that could escape the store's root or name something other than a blob: a bug, not user input. */
export class InvalidBlobKeyError extends Error {
  readonly code = 'invalid_blob_key';
  constructor(readonly key: string) {
    super(`invalid blob key: ${JSON.stringify(key.slice(0, 100))}`);
    this.name = 'InvalidBlobKeyError';
  }
}

/** UTF-8 bytes. S3 allows 1024 per key (with the adapter's prefix); a file system 255 per name. */
const MAX_KEY_BYTES = 512;
const MAX_SEGMENT_BYTES = 255;
// Control characters (Unicode Cc: NUL to U+001F, DEL, U+0080 to U+009F) break file names, S3's XML
// listings and log lines alike; a backslash is a separator on some systems and some S3-compatible stores.
const FORBIDDEN_CHARACTER = /[\p{Cc}\\]/u;

/**
 * Same rules for every adapter, so a key that works on disk also works on S3 and vice versa.
 * Segments are separated by single slashes, are never empty and never start with a dot, which
 * rules out `.`, `..` and adapter-private names such as the fs store's `.tmp` directory. Spaces
 * and any Unicode are allowed: adapters must round-trip them (S3 URL-encodes them).
 */
export function assertValidBlobKey(key: string): void {
  if (typeof key !== 'string' || !isValidBlobKey(key)) throw new InvalidBlobKeyError(String(key));
}

function isValidBlobKey(key: string): boolean {
  if (FORBIDDEN_CHARACTER.test(key) || Buffer.byteLength(key) > MAX_KEY_BYTES) return false;
  // A lone UTF-16 surrogate has no UTF-8 form: the stored name would not be the key.
  if (Buffer.from(key, 'utf8').toString('utf8') !== key) return false;
  return key
    .split('/')
    .every((segment) => segment !== '' && !segment.startsWith('.') && Buffer.byteLength(segment) <= MAX_SEGMENT_BYTES);
}
