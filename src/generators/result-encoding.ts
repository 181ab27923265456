import type { Sharp } from 'sharp';
import {
  CONTENT_TYPE_OF_FORMAT,
  DEFAULT_OUTPUT_COMPRESSION,
  DEFAULT_OUTPUT_FORMAT,
  type OutputFormat,
} from '../../schemas/output-format.js';
import { RESULT_PNG_OPTIONS, type GenerationInput, type ResultContentType } from './port.js';

/**
 * WebP's encoder effort (0-6): 2 instead of sharp's 4 takes about half the time on a 4K image for a
 * file a few percent larger; encoding is most of a local 4K task's time, as it is for PNG.
 */
const WEBP_EFFORT = 2;

/** The format a task's result is stored in (docs/design.md §3.4; decision 0024): png unless asked otherwise. */
export function resultFormatOf(input: Pick<GenerationInput, 'outputFormat' | 'outputCompression'>): {
  format: OutputFormat;
  quality: number;
  contentType: ResultContentType;
} {
  const format = input.outputFormat ?? DEFAULT_OUTPUT_FORMAT;
  return {
    format,
    quality: input.outputCompression ?? DEFAULT_OUTPUT_COMPRESSION,
    contentType: CONTENT_TYPE_OF_FORMAT[format],
  };
}

/**
 * Ends an image pipeline (already at the catalog size) with the encoder of the task's format.
 * JPEG has no alpha: a transparent area becomes white, as a page would show it, not black.
 */
export async function encodeResult(
  pipeline: Sharp,
  input: Pick<GenerationInput, 'outputFormat' | 'outputCompression'>,
): Promise<{ bytes: Buffer; contentType: ResultContentType }> {
  const { format, quality, contentType } = resultFormatOf(input);
  switch (format) {
    case 'jpeg':
      return { bytes: await pipeline.flatten({ background: '#ffffff' }).jpeg({ quality }).toBuffer(), contentType };
    case 'webp':
      return { bytes: await pipeline.webp({ quality, effort: WEBP_EFFORT }).toBuffer(), contentType };
    case 'png':
      return { bytes: await pipeline.png(RESULT_PNG_OPTIONS).toBuffer(), contentType };
  }
}
