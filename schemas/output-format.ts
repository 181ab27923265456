import { Type } from '@sinclair/typebox';
import { Int32 } from './primitives.js';

/**
 * Output formats of a result (docs/design.md §3.4; decision 0024): one list for both models, the
 * request schemas, the task resource and the worker's encoder.
 */
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];
export const DEFAULT_OUTPUT_FORMAT: OutputFormat = 'png';

/** The formats `output_compression` applies to: PNG is lossless, there is no quality to choose. */
export const LOSSY_OUTPUT_FORMATS = ['jpeg', 'webp'] as const satisfies readonly OutputFormat[];

/**
 * The encoder's quality on OpenAI's scale (100 = least loss, largest file) when a lossy format is
 * asked for without `output_compression`: sharp's own default for JPEG and WebP, which keeps a 4K
 * WebP well under a fifth of the PNG's bytes (BENCHMARKS.md) without visible artefacts.
 */
export const DEFAULT_OUTPUT_COMPRESSION = 80;

export const CONTENT_TYPE_OF_FORMAT: Readonly<Record<OutputFormat, 'image/png' | 'image/jpeg' | 'image/webp'>> = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
};

export const OUTPUT_COMPRESSION_DESCRIPTION =
  `Quality of a \`jpeg\` or \`webp\` result, 0 to 100 (OpenAI's \`output_compression\` scale: 100 keeps the most detail ` +
  `and makes the largest file); default ${DEFAULT_OUTPUT_COMPRESSION}. Refused with \`png\`, which is lossless.`;

/**
 * Why `output_compression` is refused without a lossy `output_format` (absent = png): a paid
 * request is not silently read otherwise than it was written. The core checks it (pricing.ts),
 * not the schema: a conditional schema reads badly in the OpenAPI document and its tools.
 */
export const OUTPUT_COMPRESSION_NOT_APPLICABLE =
  'Applies only with output_format jpeg or webp; a png result is lossless and has no compression to choose.';

/** The request's format fields, inside `parameters` of every model. */
export const outputFormatProperties = () => ({
  output_format: Type.Optional(
    Type.Unsafe<OutputFormat>({
      type: 'string',
      enum: [...OUTPUT_FORMATS],
      default: DEFAULT_OUTPUT_FORMAT,
      description: 'Encoding of the result, at the same pixel size and price: png (lossless), jpeg or webp.',
    }),
  ),
  output_compression: Type.Optional(
    Int32({
      minimum: 0,
      maximum: 100,
      default: DEFAULT_OUTPUT_COMPRESSION,
      description: OUTPUT_COMPRESSION_DESCRIPTION,
    }),
  ),
});
