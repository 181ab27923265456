import type { Readable } from 'node:stream';
import sharp, { type Sharp } from 'sharp';

/** An inline preview stays below this (a model's context takes images of about this size at most). */
export const PREVIEW_MAX_BYTES = 1_000_000;
/** The longest side of a preview: enough to judge the image, small enough for an agent's context. */
const PREVIEW_MAX_SIDE = 1024;
const PREVIEW_QUALITY = 80;

export interface ImagePreview {
  bytes: Buffer;
  contentType: 'image/jpeg';
  width: number;
  height: number;
}

/**
 * A JPEG preview of an image (streamed in, never enlarged): fitted into 1024×1024, then halved
 * until it is at most PREVIEW_MAX_BYTES. JPEG because every client that shows images takes it.
 */
export async function previewOf(image: Readable): Promise<ImagePreview> {
  const fitted = (input: Sharp, side: number) =>
    input
      .rotate()
      .resize({ width: side, height: side, fit: 'inside', withoutEnlargement: true })
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: PREVIEW_QUALITY, mozjpeg: true });
  const first = fitted(sharp({ limitInputPixels: false }), PREVIEW_MAX_SIDE);
  image.on('error', (error) => first.destroy(error));
  let { data, info } = await image.pipe(first).toBuffer({ resolveWithObject: true });
  let side = PREVIEW_MAX_SIDE;
  while (data.length > PREVIEW_MAX_BYTES && side > 64) {
    side = Math.floor(side / 2);
    ({ data, info } = await fitted(sharp(data), side).toBuffer({ resolveWithObject: true }));
  }
  return { bytes: data, contentType: 'image/jpeg', width: info.width, height: info.height };
}
