import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import sharp, { type Metadata, type OutputInfo, type Sharp } from 'sharp';

export type ImageType = 'image/png' | 'image/jpeg' | 'image/webp';

export interface NormalizedImage {
  bytes: Buffer;
  contentType: ImageType;
  width: number;
  height: number;
  sizeBytes: number;
  /** hex of the stored bytes */
  sha256: string;
}

export class UploadRejectedError extends Error {
  constructor(
    readonly code: 'unsupported_media_type' | 'invalid_image',
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'UploadRejectedError';
  }
}

const SNIFF_BYTES = 12;
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const JPEG_SIGNATURE = Buffer.from([0xff, 0xd8, 0xff]);
const SHARP_FORMAT_OF: Record<ImageType, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/webp': 'webp',
};

/**
 * libvips keeps the results of recent operations (50 MB by default) in case they are asked for
 * again; neither an upload nor a generated image ever is, and a server holding that cache looks like
 * a leak. Called once at process start by the long-running commands (serve, api, worker).
 */
export function releaseImageCaches(): void {
  sharp.cache(false);
}

/** The type the bytes say, whatever the client claimed. */
export function sniffImageType(head: Buffer): ImageType | null {
  if (head.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (head.subarray(0, 3).equals(JPEG_SIGNATURE)) return 'image/jpeg';
  if (head.length >= 12 && head.toString('latin1', 0, 4) === 'RIFF' && head.toString('latin1', 8, 12) === 'WEBP') {
    return 'image/webp';
  }
  return null;
}

/**
 * Turns an uploaded file into what we store: checked to be a whole PNG, JPEG or WebP within the
 * pixel limit, EXIF orientation applied, and re-encoded in the same format so that no EXIF, GPS,
 * XMP or other metadata survives. Throws UploadRejectedError for anything we will not store.
 */
export async function normalizeUpload(filePath: string, opts: { maxPixels: number }): Promise<NormalizedImage> {
  const contentType = sniffImageType(await readHead(filePath));
  if (contentType === null) {
    throw new UploadRejectedError('unsupported_media_type', 'The upload is not a PNG, JPEG or WebP image.');
  }

  // The header alone gives the dimensions, so a small file claiming a huge canvas (a
  // decompression bomb) is refused before any pixel memory is allocated. metadata() decodes no
  // pixels, so sharp's own pixel limit is lifted here to let the check below say what was wrong.
  let header: Metadata;
  try {
    header = await sharp(filePath, { limitInputPixels: false }).metadata();
  } catch (error) {
    throw invalidImage(error);
  }
  if (header.format !== SHARP_FORMAT_OF[contentType]) throw invalidImage();
  if (header.width * header.height > opts.maxPixels) {
    throw new UploadRejectedError(
      'invalid_image',
      `The image is ${header.width}×${header.height} pixels; at most ${opts.maxPixels} pixels are accepted.`,
    );
  }

  // failOn 'error' rejects truncated and corrupt pixel data (a JPEG cut short fails with
  // "premature end of JPEG image", as do levels 'truncated' and 'warning') while still accepting
  // images that only raise decoder warnings, such as stray bytes between JPEG markers, which
  // browsers display fine.
  // limitInputPixels repeats the header check inside libvips in case a decoder disagrees.
  const decoded = sharp(filePath, {
    failOn: 'error',
    limitInputPixels: opts.maxPixels,
    sequentialRead: true,
  }).autoOrient();
  let output: { data: Buffer; info: OutputInfo };
  try {
    // No withMetadata()/keepMetadata(): sharp then drops EXIF, XMP, IPTC and ICC and converts to sRGB.
    output = await encodeAs(contentType, decoded).toBuffer({ resolveWithObject: true });
  } catch (error) {
    throw invalidImage(error);
  }

  const bytes = output.data;
  return {
    bytes,
    contentType,
    width: output.info.width,
    height: output.info.height,
    sizeBytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

function encodeAs(contentType: ImageType, image: Sharp): Sharp {
  switch (contentType) {
    case 'image/png':
      return image.png();
    case 'image/jpeg':
      // optimiseCoding (an optimal Huffman table) makes libjpeg hold every coefficient of the image
      // for a second pass: about 150 MB for a 24-megapixel photo, per upload being encoded, against a
      // file a few per cent smaller. Off, the encoder streams strips like the decoder
      // (bench/upload-memory-photos.ts).
      return image.jpeg({ quality: 90, mozjpeg: false, optimiseCoding: false });
    case 'image/webp':
      return image.webp({ quality: 90 });
  }
}

async function readHead(filePath: string): Promise<Buffer> {
  const file = await open(filePath, 'r');
  try {
    const head = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await file.read(head, 0, SNIFF_BYTES, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}

// libvips messages can name the temp file path, so they go to `cause` (for logs), not to the client.
function invalidImage(cause?: unknown): UploadRejectedError {
  return new UploadRejectedError('invalid_image', 'The image could not be decoded; it may be truncated or corrupt.', {
    cause,
  });
}
