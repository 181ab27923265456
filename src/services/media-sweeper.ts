import type { BlobStore } from '../blobs/port.js';
import type { MediaStore } from '../store/port.js';
import { sweepSpoolFiles } from './upload-spool.js';

export interface MediaSweepOptions {
  store: MediaStore;
  blobs: BlobStore;
  now: Date;
  /** Rows deleted and blobs deleted per call, each at most this many. */
  batchSize?: number;
  /** Where uploads are spooled (DATA_DIR/tmp); files of dead processes there are left by crashes. */
  uploadTempDir?: string;
  log?: { warn(details: object, message: string): void };
}

export interface MediaSweepResult {
  /** Expired media rows deleted (their blobs were queued for deletion). */
  expiredMedia: number;
  /** Blobs deleted from the queue: of expired or deleted media, and orphans of crashed writers. */
  blobsDeleted: number;
  blobFailures: number;
  staleTempFiles: number;
  /** A batch was full: call again soon rather than after the usual interval. */
  more: boolean;
}

const DEFAULT_BATCH_SIZE = 100;

/**
 * One pass of retention (docs/design.md §3.8): deletes expired media rows, then the blobs whose deletion is
 * due. Rows go first, so an expired media is unreachable even if its blob outlives this pass; a
 * blob that cannot be deleted now stays queued and is retried by the next pass. Safe to run in
 * several processes at once: every step is idempotent.
 */
export async function sweepExpiredMedia(options: MediaSweepOptions): Promise<MediaSweepResult> {
  const { store, blobs, now } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;

  const expiredMedia = await store.deleteExpiredMedia(now, batchSize);

  const due = await store.listDueBlobDeletions(now, batchSize);
  let blobsDeleted = 0;
  let blobFailures = 0;
  for (const blobKey of due) {
    try {
      await blobs.delete(blobKey);
      await store.completeBlobDeletion(blobKey, now);
      blobsDeleted += 1;
    } catch (error) {
      blobFailures += 1;
      options.log?.warn({ err: error, blobKey }, 'blob deletion failed; it stays queued');
    }
  }

  const staleTempFiles = options.uploadTempDir ? await sweepSpoolFiles(options.uploadTempDir, now) : 0;

  return {
    expiredMedia,
    blobsDeleted,
    blobFailures,
    staleTempFiles,
    more: expiredMedia === batchSize || (due.length === batchSize && blobsDeleted > 0),
  };
}
