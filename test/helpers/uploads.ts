import { newIdAt } from '../../src/ids.js';
import type { Store } from '../../src/store/port.js';

/**
 * An upload's row, as the media service stores it (its blob reserved first), without bytes behind
 * it: for store tests that need a task's image references to exist. Returns the media id.
 */
export async function storeUpload(store: Store, accountId: string, now: Date, expiresInMs = 3_600_000): Promise<string> {
  const id = newIdAt(now);
  const blobKey = `uploads/${id}`;
  await store.scheduleBlobDeletion(blobKey, new Date(now.getTime() + 60_000));
  const stored = await store.insertMedia(
    { id, accountId, source: 'upload', contentType: 'image/png', width: 1, height: 1, sizeBytes: 1, sha256: '00', blobKey, taskId: null, createdAt: now, expiresAt: new Date(now.getTime() + expiresInMs) },
    now,
  );
  if (!stored) throw new Error('the upload was not stored');
  return id;
}
