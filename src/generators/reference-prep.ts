import sharp, { type Metadata } from 'sharp';
import { GenerationError } from './port.js';
import { referenceContentType } from './upstream-call.js';

/** What a provider takes per reference image: the longest side in pixels, and the encoded bytes. */
export interface ReferenceLimits {
  maxEdge: number;
  maxBytes: number;
}

/**
 * Per provider (decision 0011). Gemini: 7 MB per inline image, Vertex AI's documented
 * limit for Gemini 3 Pro Image (the Gemini API's own limit is the 20 MB request); OpenAI: "less
 * than 50MB" per image for the GPT image models' edits (the SDK's images types). The edge is ours:
 * no provider uses more than 4096 px of a reference, and it bounds the bytes sent well below both.
 */
export const GEMINI_REFERENCE_LIMITS: ReferenceLimits = { maxEdge: 4096, maxBytes: 7_000_000 };
/**
 * The Gemini API takes inline data up to a 20 MB request (its documented limit; base64 adds a
 * third): the references share 14 MB of raw bytes, so that many of them fit in one request.
 */
export const GEMINI_INLINE_BUDGET_BYTES = 14_000_000;
export const OPENAI_REFERENCE_LIMITS: ReferenceLimits = { maxEdge: 4096, maxBytes: 50_000_000 };

// Uploads are capped at 40 Mpx; decoding is bounded a little above it.
const MAX_INPUT_PIXELS = 64 * 1024 * 1024;

/**
 * A reference as the provider takes it: as stored when within the limits; else scaled down to fit
 * `maxEdge` (never up) and re-encoded (JPEG, or PNG when it has transparency), smaller again until
 * it fits `maxBytes`. Called for one reference at a time, so only one is decoded at once.
 */
export async function prepareReference(
  bytes: Buffer,
  limits: ReferenceLimits,
): Promise<{ bytes: Buffer; type: 'image/png' | 'image/jpeg' | 'image/webp' }> {
  const type = referenceContentType(bytes);
  let metadata: Metadata;
  try {
    metadata = await sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS }).metadata();
  } catch {
    throw unreadable();
  }
  const edge = Math.max(metadata.width ?? 0, metadata.height ?? 0);
  if (edge <= limits.maxEdge && bytes.length <= limits.maxBytes) return { bytes, type };
  const alpha = metadata.hasAlpha === true;
  for (let target = Math.min(edge, limits.maxEdge); target >= 64; target = Math.floor(target * 0.75)) {
    const pipeline = sharp(bytes, { limitInputPixels: MAX_INPUT_PIXELS })
      .rotate()
      .resize(target, target, { fit: 'inside', withoutEnlargement: true });
    const encoded = alpha
      ? await pipeline.png({ compressionLevel: 6 }).toBuffer()
      : await pipeline.jpeg({ quality: 90, mozjpeg: false }).toBuffer();
    if (encoded.length <= limits.maxBytes) return { bytes: encoded, type: alpha ? 'image/png' : 'image/jpeg' };
  }
  throw unreadable();
}

/** Every reference prepared, one after the other (one decoded at a time), in order. */
export async function prepareReferences(
  references: readonly Buffer[],
  limits: ReferenceLimits,
  signal: AbortSignal,
): Promise<{ bytes: Buffer; type: 'image/png' | 'image/jpeg' | 'image/webp' }[]> {
  const prepared = [];
  for (const bytes of references) {
    signal.throwIfAborted();
    prepared.push(await prepareReference(bytes, limits));
  }
  return prepared;
}

function unreadable(): GenerationError {
  return new GenerationError('reference_unreadable', 'A reference image could not be prepared for the model.', false);
}
