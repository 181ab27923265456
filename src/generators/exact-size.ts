import sharp, { type Metadata } from 'sharp';
import { upscaleFactor } from '../core/size-plan.js';
import { upstreamFailure } from '../core/upstream-failure.js';
import { GenerationError, RESULT_PNG_OPTIONS, type GeneratedImage } from './port.js';

// A model's reply is not trusted to be small: the 4K catalog sizes are 27 Mpx, so 64 Mpx leaves
// room for a model that overshoots without letting a hostile header declare billions of pixels.
const UPSTREAM_MAX_INPUT_PIXELS = 8192 * 8192;

/**
 * Keeps the exact-size promise (docs/design.md §3.2) for an image a model returned: at the catalog size
 * and in PNG it is kept byte for byte; in another format it is re-encoded to PNG; at another size
 * it is scaled to cover the catalog size and centre-cropped to it, and the result says from what.
 * An image that would have to be enlarged by more than `maxUpscale` (MAX_UPSCALE) is refused:
 * `upscale_exceeded`, final.
 */
export async function toExactSizePng(
  bytes: Buffer,
  width: number,
  height: number,
  maxUpscale = Number.POSITIVE_INFINITY,
): Promise<GeneratedImage> {
  let metadata: Metadata;
  try {
    metadata = await sharp(bytes, { limitInputPixels: UPSTREAM_MAX_INPUT_PIXELS }).metadata();
  } catch {
    throw invalidImage();
  }
  const sameSize = metadata.width === width && metadata.height === height;
  if (!sameSize && metadata.width && metadata.height) {
    const factor = upscaleFactor({ width: metadata.width, height: metadata.height }, { width, height });
    if (factor > maxUpscale) {
      const failure = upstreamFailure('upscale_exceeded');
      throw new GenerationError(failure.code, failure.message, failure.transient, {
        upstream: { reason: `reply ${metadata.width}x${metadata.height} would need ${factor.toFixed(2)}x` },
      });
    }
  }
  if (sameSize && metadata.format === 'png') return { bytes, contentType: 'image/png', width, height };
  try {
    const pipeline = sharp(bytes, { limitInputPixels: UPSTREAM_MAX_INPUT_PIXELS });
    if (!sameSize) pipeline.resize(width, height, { fit: 'cover', position: 'centre' });
    const png = await pipeline.png(RESULT_PNG_OPTIONS).toBuffer();
    const resizedFrom = sameSize ? undefined : { width: metadata.width ?? 0, height: metadata.height ?? 0 };
    return { bytes: png, contentType: 'image/png', width, height, ...(resizedFrom ? { resizedFrom } : {}) };
  } catch {
    throw invalidImage();
  }
}

function invalidImage(): GenerationError {
  const failure = upstreamFailure('upstream_invalid_image');
  return new GenerationError(failure.code, failure.message, failure.transient);
}
