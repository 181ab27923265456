import type { MediaRecord, TaskCompletion } from './port.js';

/** The media rows a completion writes for the task's account: one per generated image. */
export function generatedMediaRecords(completion: TaskCompletion, accountId: string): MediaRecord[] {
  return completion.media.map((m) => ({
    ...m,
    accountId,
    source: 'generated',
    taskId: completion.taskId,
    createdAt: completion.now,
  }));
}

/**
 * Thrown inside a completion's transaction when a generated image's blob reservation lapsed
 * before its media row was written (the blob may already be swept): it rolls the whole completion
 * back, and the store reports the completion as not made, so that the task stays IN_PROGRESS for
 * a later attempt.
 */
export class BlobReservationLapsedError extends Error {
  constructor(blobKey: string) {
    super(`The reservation of blob ${blobKey} lapsed before its media row was written.`);
    this.name = 'BlobReservationLapsedError';
  }
}
