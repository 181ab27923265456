import type { Readable } from 'node:stream';
import type { BlobStore, ByteRange } from '../blobs/port.js';
import { DomainError, notFound } from '../core/errors.js';
import { newIdAt } from '../ids.js';
import { normalizeUpload, UploadRejectedError, type NormalizedImage } from '../images/normalize-upload.js';
import type { MediaRecord, MediaSource, MediaStore } from '../store/port.js';

/** A media row as the service hands it out; routes name it through the service, never the store. */
export type { MediaRecord };
import { ConcurrencyLimit } from '../concurrency-limit.js';

/**
 * How long a blob may exist without its media row before the sweeper deletes it. Far longer than
 * any put + insert takes, so only the blobs of writers that crashed in between are ever swept.
 */
export const ORPHAN_BLOB_GRACE_MS = 60 * 60 * 1000;

export const mediaBlobKey = (mediaId: string) => `media/${mediaId}`;

export interface MediaWriteDependencies {
  store: MediaStore;
  blobs: BlobStore;
  now: () => Date;
}

export interface StoreMediaInput {
  accountId: string;
  source: MediaSource;
  taskId: string | null;
  image: Pick<NormalizedImage, 'bytes' | 'contentType' | 'width' | 'height' | 'sizeBytes' | 'sha256'>;
  /** expires_at = created_at + retentionMs (uploads and results keep for different times). */
  retentionMs: number;
}

/**
 * Writes an image and its media row so that no reader ever sees a row without its blob: the blob
 * key is first queued for deletion after a grace period, then the blob is put, then the row is
 * inserted in the transaction that takes the deletion back. A crash anywhere in between leaves at
 * most an orphan blob, which the sweeper deletes once the grace period is over.
 */
export async function storeMedia(deps: MediaWriteDependencies, input: StoreMediaInput): Promise<MediaRecord> {
  const createdAt = deps.now();
  const id = newIdAt(createdAt);
  const blobKey = mediaBlobKey(id);
  await deps.store.scheduleBlobDeletion(blobKey, new Date(createdAt.getTime() + ORPHAN_BLOB_GRACE_MS));
  await deps.blobs.put(blobKey, input.image.bytes);
  const record: MediaRecord = {
    id,
    accountId: input.accountId,
    source: input.source,
    contentType: input.image.contentType,
    width: input.image.width,
    height: input.image.height,
    sizeBytes: input.image.sizeBytes,
    sha256: input.image.sha256,
    blobKey,
    taskId: input.taskId,
    createdAt,
    expiresAt: new Date(createdAt.getTime() + input.retentionMs),
  };
  if (!(await deps.store.insertMedia(record, deps.now()))) {
    throw new Error(`the deletion reservation of ${blobKey} ran out before its media row was inserted`);
  }
  return record;
}

export interface MediaServiceOptions extends MediaWriteDependencies {
  uploadRetentionMs: number;
  maxPixels: number;
  /**
   * Uploads decoded and re-encoded at once. Each holds a decoder and an output buffer about the
   * size of the upload, so this bounds the memory uploads use whatever their number.
   */
  normalizeConcurrency: number;
  /**
   * Set: content is fetched from the blob store directly, through presigned URLs living at most
   * this long (only on a blob store that presigns, S3).
   */
  presignedDownloadTtlSeconds?: number;
  log: { warn(details: object, message: string): void };
}

export interface DirectDownloadHeaders {
  contentDisposition: string;
  cacheControl: string;
}

/** Media use cases: uploads, reads and deletes, on top of the store and the blob storage. */
export class MediaService {
  private readonly normalizing: ConcurrencyLimit;

  constructor(private readonly options: MediaServiceOptions) {
    this.normalizing = new ConcurrencyLimit(options.normalizeConcurrency);
  }

  /** Checks, cleans and stores the image in uploadedFile (which the caller owns and removes). */
  createUpload(accountId: string, uploadedFile: string): Promise<MediaRecord> {
    return this.normalizing.run(async () => {
      const image = await this.normalize(uploadedFile);
      return storeMedia(this.options, {
        accountId,
        source: 'upload',
        taskId: null,
        image,
        retentionMs: this.options.uploadRetentionMs,
      });
    });
  }

  async get(accountId: string, mediaId: string): Promise<MediaRecord> {
    const media = await this.options.store.getMedia(accountId, mediaId, this.options.now());
    if (!media) throw notFound('Media');
    return media;
  }

  /** Whoever owns it; only for callers that proved access another way (a signed URL). */
  async getForSignedAccess(mediaId: string): Promise<MediaRecord> {
    const media = await this.options.store.getMediaById(mediaId, this.options.now());
    if (!media) throw notFound('Media');
    return media;
  }

  /** The bytes of the media, or of range within them. */
  async openContent(media: MediaRecord, range?: ByteRange): Promise<{ body: Readable; sizeBytes: number }> {
    const content = await this.options.blobs.get(media.blobKey, range);
    // Only a delete racing this read gets here; the row is gone by now, so the media is too.
    if (!content) throw notFound('Media');
    return content;
  }

  /**
   * A short-lived URL of the blob store that serves the content with these headers, so that the
   * bytes do not pass through this process; null when downloads are not presigned. It lives no
   * longer than freshForSeconds (what the answer may be cached for: the media's or the signed
   * URL's end), counted from the same instant as the caller's Cache-Control.
   */
  async directDownloadUrl(
    media: MediaRecord,
    headers: DirectDownloadHeaders,
    freshForSeconds: number,
  ): Promise<string | null> {
    const { blobs, presignedDownloadTtlSeconds } = this.options;
    if (presignedDownloadTtlSeconds === undefined || !blobs.presignedGetUrl) return null;
    return blobs.presignedGetUrl(media.blobKey, {
      expiresInSeconds: Math.max(1, Math.min(presignedDownloadTtlSeconds, freshForSeconds)),
      contentType: media.contentType,
      ...headers,
    });
  }

  /** The row goes first (and with it all access); the blob follows, now or from the sweeper. */
  async delete(accountId: string, mediaId: string): Promise<void> {
    const now = this.options.now();
    const blobKey = await this.options.store.deleteMedia(accountId, mediaId, now);
    if (!blobKey) throw notFound('Media');
    try {
      await this.options.blobs.delete(blobKey);
      await this.options.store.completeBlobDeletion(blobKey, now);
    } catch (error) {
      this.options.log.warn({ err: error, blobKey }, 'blob of a deleted media not removed yet; the sweeper will retry');
    }
  }

  private async normalize(uploadedFile: string): Promise<NormalizedImage> {
    try {
      return await normalizeUpload(uploadedFile, { maxPixels: this.options.maxPixels });
    } catch (error) {
      if (!(error instanceof UploadRejectedError)) throw error;
      throw new DomainError(error.code, error.message, [
        {
          pointer: '/file',
          location: 'body',
          code: error.code === 'invalid_image' ? 'invalid_image' : 'unsupported_type',
          detail: error.message,
        },
      ]);
    }
  }
}
