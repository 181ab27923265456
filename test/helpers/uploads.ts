import { newIdAt } from '../../src/ids.js';
import type { MediaRecord, Store } from '../../src/store/port.js';

/**
 * An upload's row, as the media service stores it (its blob reserved first), without bytes behind
 * it: for store tests that need a media row to exist. Returns the stored record.
 */
export async function storeUpload(
  store: Store,
  accountId: string,
  now: Date,
  expiresInMs = 3_600_000,
): Promise<MediaRecord> {
  const id = newIdAt(now);
  const media: MediaRecord = {
    id,
    accountId,
    source: 'upload',
    contentType: 'image/png',
    width: 1,
    height: 1,
    sizeBytes: 1,
    sha256: '00',
    blobKey: `uploads/${id}`,
    taskId: null,
    createdAt: now,
    expiresAt: new Date(now.getTime() + expiresInMs),
  };
  // A blob is reserved (queued for deletion in the future) before its row is inserted.
  await store.media.scheduleBlobDeletion(media.blobKey, new Date(now.getTime() + 60_000));
  if (!(await store.media.insertMedia(media, now))) throw new Error('the upload was not stored');
  return media;
}
