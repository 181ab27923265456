import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  S3Client,
  S3ServiceException,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { assertValidBlobKey, type BlobStore, type ByteRange, type PresignedGetOptions } from './port.js';

/** S3's smallest part but the last; each put holds at most (queue + 1) of them while streaming. */
const PART_SIZE_BYTES = 5 * 1024 * 1024;
const PARTS_IN_FLIGHT = 2;
/** A multipart upload started this long ago is no put still running: a crash left it behind. */
const DEFAULT_STALE_UPLOAD_AGE_MS = 24 * 60 * 60 * 1000;

export interface S3BlobStoreOptions {
  client: S3Client;
  bucket: string;
  /** Prepended to every key ("" or ending with "/"), so that one bucket can hold other data too. */
  prefix?: string;
}

export interface S3ConnectionSettings {
  region: string;
  /** An S3-compatible store (R2, MinIO, Ceph, SeaweedFS, Garage); unset = AWS. */
  endpoint?: string;
  forcePathStyle: boolean;
  /** Unset = the SDK's credential chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profiles, roles). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/**
 * An S3 client for AWS or an S3-compatible store. Against a store of another vendor the SDK's
 * default request checksums (CRC32 on every put, since 3.729) are only sent when an operation
 * requires one: several S3-compatible stores rejected or mis-stored them.
 */
export function createS3Client(settings: S3ConnectionSettings): S3Client {
  const config: S3ClientConfig = {
    region: settings.region,
    forcePathStyle: settings.forcePathStyle,
    requestHandler: { connectionTimeout: 5_000, requestTimeout: 60_000 },
  };
  if (settings.endpoint) {
    config.endpoint = settings.endpoint;
    config.requestChecksumCalculation = 'WHEN_REQUIRED';
    config.responseChecksumValidation = 'WHEN_REQUIRED';
  }
  if (settings.credentials) config.credentials = settings.credentials;
  return new S3Client(config);
}

/**
 * Blobs as objects of one bucket under a prefix. A put is one PutObject, or a multipart upload
 * (lib-storage) when the body is larger than a part: either way the object appears whole or not
 * at all, and a failed multipart upload is aborted by lib-storage; one a crash left behind is
 * aborted by sweepTemp.
 */
export class S3BlobStore implements BlobStore {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(options: S3BlobStoreOptions) {
    this.client = options.client;
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
  }

  async put(key: string, body: Readable | Buffer): Promise<{ sizeBytes: number }> {
    let objectKey: string;
    try {
      objectKey = this.objectKey(key);
    } catch (error) {
      if (!Buffer.isBuffer(body)) body.destroy();
      throw error;
    }
    let sizeBytes = Buffer.isBuffer(body) ? body.length : 0;
    const source = Buffer.isBuffer(body)
      ? body
      : // The pipeline destroys the counter with the source's error, which fails the upload.
        pipeline(
          body,
          new Transform({
            transform(chunk: Buffer, _encoding, done) {
              sizeBytes += chunk.length;
              done(null, chunk);
            },
          }),
          () => {},
        );
    try {
      const upload = new Upload({
        client: this.client,
        params: { Bucket: this.bucket, Key: objectKey, Body: source },
        partSize: PART_SIZE_BYTES,
        queueSize: PARTS_IN_FLIGHT,
        leavePartsOnError: false,
      });
      await upload.done();
    } catch (error) {
      if (!Buffer.isBuffer(body)) body.destroy();
      if (source instanceof Readable) source.destroy();
      throw error;
    }
    return { sizeBytes };
  }

  async get(key: string, range?: ByteRange): Promise<{ body: Readable; sizeBytes: number } | null> {
    const objectKey = this.objectKey(key);
    try {
      const object = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: objectKey,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      // In Node the SDK's body is the response itself (an IncomingMessage).
      return { body: object.Body as Readable, sizeBytes: object.ContentLength ?? 0 };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async getBuffer(key: string): Promise<Buffer | null> {
    const objectKey = this.objectKey(key);
    try {
      const object = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      const bytes = await object.Body!.transformToByteArray();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    // S3 answers 204 for a missing key too: idempotent as the port requires.
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  /**
   * Aborts the multipart uploads under the prefix begun more than olderThanMs ago: those of puts
   * a crash interrupted, whose parts S3 would otherwise keep (and bill) for ever. A put still
   * running takes seconds, far less than the default age. Returns how many were aborted.
   */
  async sweepTemp(olderThanMs = DEFAULT_STALE_UPLOAD_AGE_MS): Promise<number> {
    const cutoff = Date.now() - olderThanMs;
    let aborted = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await this.client.send(
        new ListMultipartUploadsCommand({
          Bucket: this.bucket,
          Prefix: this.prefix || undefined,
          KeyMarker: keyMarker,
          UploadIdMarker: uploadIdMarker,
        }),
      );
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId || !upload.Initiated || upload.Initiated.getTime() > cutoff) continue;
        try {
          await this.client.send(
            new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: upload.Key, UploadId: upload.UploadId }),
          );
          aborted += 1;
        } catch (error) {
          // Completed or aborted meanwhile by another process: nothing left to do.
          if (!isNotFound(error)) throw error;
        }
      }
      if (!page.IsTruncated) return aborted;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }

  presignedGetUrl(key: string, options: PresignedGetOptions): Promise<string> {
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: this.objectKey(key),
      ResponseContentType: options.contentType,
      ResponseContentDisposition: options.contentDisposition,
      ResponseCacheControl: options.cacheControl,
    });
    return getSignedUrl(this.client, command, { expiresIn: options.expiresInSeconds });
  }

  /** Closes the client's sockets. */
  close(): void {
    this.client.destroy();
  }

  private objectKey(key: string): string {
    assertValidBlobKey(key);
    return this.prefix + key;
  }
}

/** A missing key or upload; a missing bucket is a misconfiguration and stays an error. */
function isNotFound(error: unknown): boolean {
  return (
    error instanceof S3ServiceException &&
    error.name !== 'NoSuchBucket' &&
    (error.name === 'NoSuchKey' || error.name === 'NoSuchUpload' || error.$metadata.httpStatusCode === 404)
  );
}
