import { createHash } from 'node:crypto';
import type { BlobStore } from '../blobs/port.js';
import type { TaskRecord } from '../core/task.js';
import type { GeneratedImage } from '../generators/port.js';
import { newIdAt } from '../ids.js';
import { mediaBlobKey, ORPHAN_BLOB_GRACE_MS } from '../services/media-service.js';
import type { GeneratedMediaInput, Store } from '../store/port.js';

export interface ResultStorageOptions {
  store: Pick<Store, 'tasks' | 'media'>;
  blobs: BlobStore;
  now: () => Date;
}

/** Stores the images under their media's keys and completes the task: false when fenced out. */
export async function storeAndComplete(
  task: TaskRecord,
  images: readonly GeneratedImage[],
  media: readonly GeneratedMediaInput[],
  { store, blobs, now }: ResultStorageOptions,
): Promise<boolean> {
  for (const [index, image] of images.entries()) {
    const { blobKey } = media[index]!;
    // Reserved before it is written (again on a retry, from now): if this process dies before
    // completeTask, the sweeper deletes the orphan once the grace period is over.
    await store.media.scheduleBlobDeletion(blobKey, new Date(now().getTime() + ORPHAN_BLOB_GRACE_MS));
    await blobs.put(blobKey, image.bytes);
  }
  if (await store.tasks.completeTask({ taskId: task.id, attempt: task.attempt, media: [...media], now: now() }))
    return true;
  // A completion retried after its answer was lost may have committed the first time: then the
  // task holds these media, and they must not be deleted as a late result's.
  const current = await store.tasks.getTaskById(task.id);
  return current?.status === 'COMPLETED' && current.generated.some((item) => item.media_id === media[0]?.id);
}

/** The media rows of a generation's images: ids and keys chosen once, so a retried store writes the same. */
export function describeImages(
  images: readonly GeneratedImage[],
  now: Date,
  retentionMs: number,
): GeneratedMediaInput[] {
  return images.map((image) => {
    const id = newIdAt(now);
    return {
      id,
      blobKey: mediaBlobKey(id),
      contentType: image.contentType,
      width: image.width,
      height: image.height,
      sizeBytes: image.bytes.length,
      sha256: createHash('sha256').update(image.bytes).digest('hex'),
      expiresAt: new Date(now.getTime() + retentionMs),
      resizedFrom: image.resizedFrom ?? null,
    };
  });
}
