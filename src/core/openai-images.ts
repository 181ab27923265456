import { findModel, MODEL_IDS } from '../../schemas/catalog.js';
import type { ModelCatalogEntry } from '../../schemas/model-entry.js';
import { NON_BLANK_PATTERN, SEED_MAX } from '../../schemas/model-entry.js';
import { OPENAI_QUALITIES, OPENAI_SIZE_TABLE, type OpenAiNamedSize, type OpenAiQuality } from '../../schemas/openai.js';
import { OUTPUT_FORMATS, type OutputFormat } from '../../schemas/output-format.js';
import { END_USER_ID_MAX_LENGTH } from './task.js';

/**
 * The OpenAI Images API read as this service's requests (decision 0025): which catalog cell an
 * OpenAI `size` and `quality` name, and every field error of a body, each naming its `param` as
 * OpenAI's errors do. Pure: no HTTP, no storage, no clock.
 */

/** OpenAI's `n` goes up to 10 (and the AI SDK sends at most 10 per call); each image is a task. */
export const OPENAI_MAX_IMAGES = 10;

export { OPENAI_QUALITIES, OPENAI_SIZE_TABLE, type OpenAiNamedSize, type OpenAiQuality };

/**
 * What `quality` asks for where `size` leaves the resolution open (`auto` or absent): `high` and
 * `hd` 2K, `xhigh` and `max` 4K (the model's highest resolution when it has no 4K), every other
 * value the model's default. With an explicit size, the size decides and `quality` is ignored.
 */
export const QUALITY_RESOLUTION: Record<OpenAiQuality, '2K' | '4K' | null> = {
  auto: null,
  low: null,
  medium: null,
  standard: null,
  high: '2K',
  hd: '2K',
  xhigh: '4K',
  max: '4K',
};

/** OpenAI's output formats are the native ones (schemas/output-format.ts). */
export const OPENAI_OUTPUT_FORMATS = OUTPUT_FORMATS;
export type OpenAiOutputFormat = OutputFormat;
export const OPENAI_RESPONSE_FORMATS = ['b64_json', 'url'] as const;
export type OpenAiResponseFormat = (typeof OPENAI_RESPONSE_FORMATS)[number];
/** `transparent` needs an alpha channel no backend here makes: refused rather than answered opaque. */
export const OPENAI_BACKGROUNDS = ['auto', 'opaque'] as const;
export const OPENAI_MODERATIONS = ['auto', 'low'] as const;
/** `user` is kept as the task's end-user id, within that id's bound. */
export const OPENAI_USER_MAX_LENGTH = END_USER_ID_MAX_LENGTH;

/** One refused field, named as OpenAI names it (`param`). */
export interface OpenAiFieldError {
  param: string;
  message: string;
}

/** What a valid OpenAI images body asks of this service: n tasks of one model and cell. */
export interface OpenAiImageRequest {
  model: ModelCatalogEntry;
  prompt: string;
  n: number;
  aspectRatio: string;
  resolution: string;
  width: number;
  height: number;
  responseFormat: OpenAiResponseFormat;
  outputFormat: OpenAiOutputFormat;
  /** Only for jpeg and webp; null = the service's default (png: always null). */
  outputCompression: number | null;
  /** Echoed in the answer as asked (`auto` when absent). */
  quality: OpenAiQuality;
  /** The end user the caller acts for (OpenAI's `user`), or null. */
  user: string | null;
  /** The seed of the first image (an extension field; image i is seed + i), or null: one is drawn. */
  seed: number | null;
}

export type OpenAiImageReading =
  | { outcome: 'ok'; request: OpenAiImageRequest }
  | { outcome: 'model_not_found'; message: string }
  | { outcome: 'invalid'; errors: OpenAiFieldError[] };

export interface ReadOptions {
  /** For an edit: the number of reference images received (`image` / `image[]`). */
  referenceImages?: number;
}

const nonBlank = new RegExp(NON_BLANK_PATTERN, 'u');
const WXH = /^([1-9][0-9]{1,4})x([1-9][0-9]{1,4})$/;

/**
 * Reads an OpenAI images body (JSON, or a multipart body's text fields, where every value is a
 * string). Unknown fields are ignored, as OpenAI does; every known field that is wrong is reported.
 */
export function readOpenAiImageRequest(body: Record<string, unknown>, options: ReadOptions = {}): OpenAiImageReading {
  const modelId = body.model;
  if (typeof modelId !== 'string' || modelId.length === 0) {
    return {
      outcome: 'invalid',
      errors: [{ param: 'model', message: `model is required: one of ${MODEL_IDS.join(', ')}.` }],
    };
  }
  const model = findModel(modelId);
  if (!model) {
    return {
      outcome: 'model_not_found',
      message: `The model '${clip(modelId)}' does not exist. The models this service offers: ${MODEL_IDS.join(', ')}.`,
    };
  }
  const errors: OpenAiFieldError[] = [];
  const refuse = (param: string, message: string) => errors.push({ param, message });

  const prompt = body.prompt;
  if (typeof prompt !== 'string') refuse('prompt', 'prompt is required: a string.');
  else {
    const length = [...prompt].length;
    if (length < model.promptLength.min || length > model.promptLength.max || !nonBlank.test(prompt))
      refuse(
        'prompt',
        `prompt must be ${model.promptLength.min} to ${model.promptLength.max} characters for ${model.id}, not whitespace alone (got ${length}).`,
      );
  }

  const n = integerField(body.n, 1);
  if (n === null || n < 1 || n > OPENAI_MAX_IMAGES)
    refuse(
      'n',
      `n must be an integer from 1 to ${OPENAI_MAX_IMAGES}; each image is one task, priced and charged as one.`,
    );

  const quality = enumField(body.quality, OPENAI_QUALITIES, 'auto');
  if (quality === null) refuse('quality', `quality must be one of ${OPENAI_QUALITIES.join(', ')}.`);

  const cell = cellOf(model, body.size, quality ?? 'auto');
  if (cell === null) refuse('size', `size must be one of ${acceptedSizes(model).join(', ')} for ${model.id}.`);

  const outputFormat = enumField(body.output_format, OPENAI_OUTPUT_FORMATS, 'png');
  if (outputFormat === null)
    refuse('output_format', `output_format must be one of ${OPENAI_OUTPUT_FORMATS.join(', ')}.`);

  const compression = integerField(body.output_compression, null);
  if (body.output_compression !== undefined && body.output_compression !== null) {
    if (compression === null || compression < 0 || compression > 100)
      refuse('output_compression', 'output_compression must be an integer from 0 to 100.');
  }

  const background = enumField(body.background, OPENAI_BACKGROUNDS, 'auto');
  if (background === null)
    refuse(
      'background',
      body.background === 'transparent'
        ? 'background "transparent" is not offered: no backend of this service makes images with an alpha channel. Use auto or opaque.'
        : `background must be one of ${OPENAI_BACKGROUNDS.join(', ')}.`,
    );

  const responseFormat = enumField(body.response_format, OPENAI_RESPONSE_FORMATS, 'b64_json');
  if (responseFormat === null)
    refuse('response_format', `response_format must be one of ${OPENAI_RESPONSE_FORMATS.join(', ')}.`);

  if (enumField(body.moderation, OPENAI_MODERATIONS, 'auto') === null)
    refuse('moderation', `moderation must be one of ${OPENAI_MODERATIONS.join(', ')}.`);

  const stream = booleanField(body.stream, false);
  if (stream === null)
    refuse('stream', 'stream must be a boolean (false: this service answers once the images are done).');
  else if (stream)
    refuse(
      'stream',
      'stream is not offered: the answer comes once the images are done. Omit stream, or follow the task in /api/v1 (its events stream).',
    );

  const user = body.user;
  if (
    user !== undefined &&
    user !== null &&
    (typeof user !== 'string' || [...user].length > OPENAI_USER_MAX_LENGTH || !nonBlank.test(user))
  )
    refuse('user', `user must be a non-blank string of at most ${OPENAI_USER_MAX_LENGTH} characters.`);

  const seed = seedField(body.seed);
  if (seed === undefined) refuse('seed', `seed must be an integer from 0 to ${SEED_MAX}.`);

  if (options.referenceImages !== undefined) {
    const { min, max } = model.imageReferenceCount;
    if (options.referenceImages < min || options.referenceImages > max)
      refuse(
        'image',
        `An edit takes ${min} to ${max} images for ${model.id} (as image or image[] parts); got ${options.referenceImages}.`,
      );
  }

  if (errors.length > 0) return { outcome: 'invalid', errors };
  return {
    outcome: 'ok',
    request: {
      model,
      prompt: prompt as string,
      n: n as number,
      ...(cell as NonNullable<typeof cell>),
      responseFormat: responseFormat as OpenAiResponseFormat,
      outputFormat: outputFormat as OpenAiOutputFormat,
      outputCompression: outputFormat === 'png' ? null : compression,
      quality: quality as OpenAiQuality,
      user: typeof user === 'string' ? user : null,
      seed: seed ?? null,
    },
  };
}

/** The sizes `size` accepts for a model: auto, OpenAI's three, and every exact catalog WxH of the model. */
export function acceptedSizes(model: ModelCatalogEntry): string[] {
  const exact = Object.values(model.pixelSizes).flatMap((byResolution) =>
    Object.values(byResolution).map(({ width, height }) => `${width}x${height}`),
  );
  return [...new Set(['auto', ...Object.keys(OPENAI_SIZE_TABLE), ...exact])];
}

/** The catalog cell an OpenAI size (and, for `auto`, quality) names for the model; null when none. */
export function cellOf(
  model: ModelCatalogEntry,
  size: unknown,
  quality: OpenAiQuality,
): { aspectRatio: string; resolution: string; width: number; height: number } | null {
  const at = (aspectRatio: string, resolution: string) => {
    const pixels = model.pixelSizes[aspectRatio]?.[resolution];
    return pixels ? { aspectRatio, resolution, ...pixels } : null;
  };
  if (size === undefined || size === null || size === 'auto')
    return at(model.defaults.aspectRatio, resolutionFor(model, QUALITY_RESOLUTION[quality]));
  if (typeof size !== 'string') return null;
  const named = OPENAI_SIZE_TABLE[size as OpenAiNamedSize];
  if (named) return at(named, '1K');
  const match = WXH.exec(size);
  if (!match) return null;
  const [width, height] = [Number(match[1]), Number(match[2])];
  for (const [aspectRatio, byResolution] of Object.entries(model.pixelSizes))
    for (const [resolution, pixels] of Object.entries(byResolution))
      if (pixels.width === width && pixels.height === height) return { aspectRatio, resolution, width, height };
  return null;
}

/** The resolution a quality asks for: the highest the model offers up to it; null = the model's default. */
function resolutionFor(model: ModelCatalogEntry, asked: '2K' | '4K' | null): string {
  if (asked === null) return model.defaults.resolution;
  const offered = model.resolutions.filter((resolution) => resolution <= asked);
  return offered.at(-1) ?? model.defaults.resolution;
}

/** A JSON integer, or a multipart field's decimal digits; `fallback` when absent; null when neither. */
function integerField(value: unknown, fallback: number | null): number | null {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'number') return Number.isInteger(value) ? value : null;
  if (typeof value === 'string' && /^[0-9]{1,4}$/.test(value)) return Number(value);
  return null;
}

/** A JSON integer or a multipart field's decimal digits within 0..SEED_MAX; null when absent; undefined when wrong. */
function seedField(value: unknown): number | null | undefined {
  if (value === undefined || value === null) return null;
  const seed = typeof value === 'string' && /^[0-9]{1,10}$/.test(value) ? Number(value) : value;
  return typeof seed === 'number' && Number.isInteger(seed) && seed >= 0 && seed <= SEED_MAX ? seed : undefined;
}

/** A JSON boolean, or a multipart field's `true`/`false`; `fallback` when absent; null when neither. */
function booleanField(value: unknown, fallback: boolean): boolean | null {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  return null;
}

function enumField<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T | null {
  if (value === undefined || value === null) return fallback;
  return typeof value === 'string' && (allowed as readonly string[]).includes(value) ? (value as T) : null;
}

function clip(text: string): string {
  return text.length <= 64 ? text : `${text.slice(0, 63)}…`;
}
