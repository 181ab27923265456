import type { BlobStore } from '../blobs/port.js';
import { GenerationError, type ImageGenerator } from '../generators/port.js';
import type { Store } from '../store/port.js';

/**
 * A task's references for its generator, in order: each read from the blob store and prepared for
 * the provider (downscaled, re-encoded) before the next is read, so a task with 10 references of
 * 20 MiB holds one raw reference at a time and keeps only the provider-sized ones (decision 0011;
 * docs/performance-history.md, "References prepared for the provider", has the peak RSS before and after).
 */
export async function loadTaskReferences(
  deps: { store: Pick<Store['media'], 'mediaBlobKeys'>; blobs: Pick<BlobStore, 'getBuffer'> },
  task: { accountId: string; imageReference: readonly string[] },
  generator: Pick<ImageGenerator, 'prepareReference'>,
  signal: AbortSignal,
): Promise<Buffer[]> {
  if (task.imageReference.length === 0) return [];
  const keys = await deps.store.mediaBlobKeys(task.accountId, [...task.imageReference]);
  const count = task.imageReference.length;
  const references: Buffer[] = [];
  for (const mediaId of task.imageReference) {
    signal.throwIfAborted();
    const key = keys.get(mediaId);
    const bytes = key ? await deps.blobs.getBuffer(key) : null;
    if (!bytes)
      throw new GenerationError('reference_unavailable', `Reference image ${mediaId} is no longer available.`, false);
    references.push(generator.prepareReference ? await generator.prepareReference(bytes, count) : bytes);
  }
  return references;
}
