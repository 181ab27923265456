import sharp, { type Metadata } from 'sharp';
import { upscaleFactor } from '../core/size-plan.js';
import { upstreamFailure } from '../core/upstream-failure.js';
import { GenerationError, type GeneratedImage, type GenerationInput } from './port.js';
import { encodeResult, resultFormatOf } from './result-encoding.js';

// A model's reply is not trusted to be small: the 4K catalog sizes are 27 Mpx, so 64 Mpx leaves
// room for a model that overshoots without letting a hostile header declare billions of pixels.
const UPSTREAM_MAX_INPUT_PIXELS = 8192 * 8192;

/**
 * Keeps the exact-size and format promises (docs/design.md §3.2, §3.4) for an image a model returned: at
 * the catalog size and in PNG, when PNG is asked for, it is kept byte for byte; otherwise it is
 * encoded in the task's output format (a provider's JPEG is re-encoded at the task's quality); at
 * another size it is scaled to cover the catalog size and centre-cropped to it, and the result
 * says from what.
 * An image that would have to be enlarged by more than `maxUpscale` (MAX_UPSCALE) is refused:
 * `upscale_exceeded`, final.
 */
export async function toExactSizeResult(
  bytes: Buffer,
  input: Pick<GenerationInput, 'width' | 'height' | 'outputFormat' | 'outputCompression'>,
  maxUpscale = Number.POSITIVE_INFINITY,
): Promise<GeneratedImage> {
  const { width, height } = input;
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
  if (sameSize && metadata.format === 'png' && resultFormatOf(input).format === 'png') {
    return { bytes, contentType: 'image/png', width, height };
  }
  try {
    const pipeline = sharp(bytes, { limitInputPixels: UPSTREAM_MAX_INPUT_PIXELS });
    if (!sameSize) pipeline.resize(width, height, { fit: 'cover', position: 'centre' });
    const encoded = await encodeResult(pipeline, input);
    const resizedFrom = sameSize ? undefined : { width: metadata.width ?? 0, height: metadata.height ?? 0 };
    return { ...encoded, width, height, ...(resizedFrom ? { resizedFrom } : {}) };
  } catch {
    throw invalidImage();
  }
}

function invalidImage(): GenerationError {
  const failure = upstreamFailure('upstream_invalid_image');
  return new GenerationError(failure.code, failure.message, failure.transient);
}
