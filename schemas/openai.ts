import { Type } from '@sinclair/typebox';
import { MAX_IMAGE_REFERENCES, MODEL_CATALOG, MODEL_IDS } from './catalog.js';
import { NON_BLANK_PATTERN, SEED_MAX } from './model-entry.js';
import { DEFAULT_OUTPUT_COMPRESSION, OUTPUT_FORMATS } from './output-format.js';
import { Int32, TokenAmount } from './primitives.js';

/**
 * The OpenAI Images API face (/v1, decision 0025): its request and answer shapes as the OpenAPI
 * document shows them. The body is read by src/core/openai-images.ts (unknown fields ignored, every
 * wrong field reported in OpenAI's error shape), so these schemas document; they do not refuse.
 */

const OPENAI_MAX_IMAGES = 10;

/**
 * OpenAI's named sizes (every one the `openai` SDK's types list, GPT image and DALL·E alike), each
 * read as the catalog cell nearest to it: the aspect ratio of the same shape (1792x1024 is 1.75:1,
 * nearest 16:9), at 1K, the resolution nearest in pixels at the base price (256x256 and 512x512 are
 * smaller than any cell; 1536x1024 gives 3:2 at 1K = 1264x848). The answer's `size` states the
 * pixels made.
 */
export const OPENAI_SIZE_TABLE = {
  '256x256': '1:1',
  '512x512': '1:1',
  '1024x1024': '1:1',
  '1536x1024': '3:2',
  '1024x1536': '2:3',
  '1792x1024': '16:9',
  '1024x1792': '9:16',
} as const satisfies Record<string, string>;
export type OpenAiNamedSize = keyof typeof OPENAI_SIZE_TABLE;

/**
 * OpenAI's `quality` values (every one the `openai` SDK's types list: GPT image and DALL·E 3).
 * They choose the resolution only where `size` leaves it open (`auto` or absent): `high` and `hd`
 * ask for 2K, `xhigh` and `max` for 4K (the model's highest resolution when it has no 4K), every
 * other value for the model's default. With an explicit size, the size decides and `quality` is
 * ignored: a client that asked for 1024x1024 gets 1024x1024.
 */
export const OPENAI_QUALITIES = ['auto', 'low', 'medium', 'high', 'xhigh', 'max', 'standard', 'hd'] as const;
export type OpenAiQuality = (typeof OPENAI_QUALITIES)[number];

/** The prompt lengths every model of the catalog takes. */
const COMMON_PROMPT_LENGTH = {
  min: Math.max(...MODEL_CATALOG.map((m) => m.promptLength.min)),
  max: Math.min(...MODEL_CATALOG.map((m) => m.promptLength.max)),
};
/** A time as OpenAI gives it: whole seconds since 1970, bounded so that clients know it fits a number. */
const UnixSeconds = (description: string) =>
  Type.Integer({ format: 'int64', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });
const SIZE_DESCRIPTION =
  "`auto` (the default cell; see `quality`), one of OpenAI's named sizes read as the nearest catalog cell at 1K (" +
  Object.entries(OPENAI_SIZE_TABLE)
    .map(([size, ratio]) => `\`${size}\` → ${ratio}`)
    .join(', ') +
  "), or any exact `WxH` of the model's catalog (GET /api/v1/models `pixel_sizes`), e.g. `2752x1536` for 16:9 at 2K. " +
  "The answer's `size` is the pixel size made.";

const imageFields = {
  model: Type.String({
    maxLength: 64,
    enum: MODEL_IDS,
    description: 'A model of this service; another name is 404 `model_not_found`.',
  }),
  prompt: Type.String({
    // The bounds every model takes; a model's own, where wider, are in its description.
    minLength: COMMON_PROMPT_LENGTH.min,
    maxLength: COMMON_PROMPT_LENGTH.max,
    pattern: NON_BLANK_PATTERN,
    description: `Text prompt in Unicode code points, not whitespace alone: ${MODEL_CATALOG.map((m) => `${m.promptLength.min} to ${m.promptLength.max} for ${m.id}`).join(', ')}.`,
  }),
  n: Type.Optional(
    Type.Integer({
      format: 'int32',
      minimum: 1,
      maximum: OPENAI_MAX_IMAGES,
      default: 1,
      description: 'Images to make: each is one task, priced and charged as one; all admitted or none.',
    }),
  ),
  size: Type.Optional(Type.String({ maxLength: 16, default: 'auto', description: SIZE_DESCRIPTION })),
  quality: Type.Optional(
    Type.String({
      enum: [...OPENAI_QUALITIES],
      default: 'auto',
      description:
        'With `size` auto or absent: `high` and `hd` ask for 2K, `xhigh` and `max` for 4K (the highest resolution the model has), ' +
        'the others for the model default (1K). With an explicit size: ignored.',
    }),
  ),
  seed: Type.Optional(
    Type.Integer({
      format: 'int64',
      minimum: 0,
      maximum: SEED_MAX,
      description:
        'An extension of this service: the seed of the first image; image i of n is made with seed + i (wrapping past ' +
        `${SEED_MAX}). Without one a seed is drawn; each task records its seed in \`parameters.seed\` (GET /api/v1/images/generations/{task_id}).`,
    }),
  ),
  output_format: Type.Optional(
    Type.String({ enum: ['png', 'jpeg', 'webp'], default: 'png', description: 'Encoding of the images.' }),
  ),
  output_compression: Type.Optional(
    Type.Integer({
      format: 'int32',
      minimum: 0,
      maximum: 100,
      description: `Quality of jpeg and webp output, 0-100 (default ${DEFAULT_OUTPUT_COMPRESSION}); ignored for png, as OpenAI does.`,
    }),
  ),
  background: Type.Optional(
    Type.String({
      enum: ['auto', 'opaque'],
      default: 'auto',
      description: '`transparent` is refused: no backend makes an alpha channel.',
    }),
  ),
  response_format: Type.Optional(
    Type.String({
      enum: ['b64_json', 'url'],
      default: 'b64_json',
      description: '`url`: a signed download URL of this service, valid for SIGNED_URL_TTL_SECONDS.',
    }),
  ),
  moderation: Type.Optional(
    Type.String({ enum: ['auto', 'low'], description: "Accepted; the backends' own moderation applies." }),
  ),
  user: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 256,
      pattern: NON_BLANK_PATTERN,
      description: 'The end user you act for: kept on the task and passed to the providers as their safety identifier.',
    }),
  ),
  stream: Type.Optional(Type.Boolean({ description: 'Not offered: `true` is refused (400, param `stream`).' })),
};

export const OpenAiImageGenerationBody = Type.Object(imageFields, {
  additionalProperties: true,
  description: 'OpenAI `images.generate` body; unknown fields are ignored, as OpenAI does.',
});

/** A file part of a multipart body: its bytes, at most the upload limit (UPLOAD_MAX_BYTES). */
const BINARY_PART = {
  type: 'string',
  format: 'binary',
  maxLength: 2_147_483_647,
  contentMediaType: 'application/octet-stream',
} as const;

export const OpenAiImageEditBody = Type.Object(
  {
    ...imageFields,
    image: Type.Array(Type.Unsafe<unknown>(BINARY_PART), {
      maxItems: MAX_IMAGE_REFERENCES,
      description:
        "Reference images (PNG, JPEG, WebP) as parts named `image` or `image[]`, within the model's reference limit; each is stored as an upload of the account.",
    }),
    mask: Type.Optional(
      Type.Unsafe<unknown>({
        ...BINARY_PART,
        description: 'Not offered: a `mask` part is refused (400, param `mask`).',
      }),
    ),
  },
  {
    additionalProperties: true,
    required: ['model', 'prompt', 'image'],
    description: 'OpenAI `images.edit` body (multipart/form-data).',
  },
);

const Base64Image = Type.String({
  maxLength: 2_147_483_647,
  contentEncoding: 'base64',
  description: 'The image, base64.',
});

export const OpenAiImagesResponse = Type.Object(
  {
    created: UnixSeconds('Unix seconds of the answer.'),
    data: Type.Array(
      Type.Object(
        {
          b64_json: Type.Optional(Base64Image),
          url: Type.Optional(Type.String({ format: 'uri', maxLength: 2048, description: 'Signed download URL.' })),
          url_expires_at: Type.Optional(
            Type.String({ format: 'date-time', maxLength: 40, description: 'When `url` stops working.' }),
          ),
        },
        { additionalProperties: false },
      ),
      { maxItems: OPENAI_MAX_IMAGES * 4, description: "The images, in the tasks' order." },
    ),
    size: Type.String({ maxLength: 16, description: 'The pixel size made, `WxH`.' }),
    quality: Type.String({ maxLength: 16, description: 'The quality asked for (`auto` when not said).' }),
    output_format: Type.String({ enum: [...OUTPUT_FORMATS], description: 'Encoding of the images.' }),
    background: Type.String({ enum: ['opaque'], description: 'Every image is opaque.' }),
    usage: Type.Object(
      {
        input_tokens: Int32({ description: 'Always 0.' }),
        output_tokens: TokenAmount({ description: 'Tokens of this service charged.' }),
        total_tokens: TokenAmount({ description: 'Tokens of this service charged for the request.' }),
        input_tokens_details: Type.Object(
          {
            text_tokens: Int32({ description: 'Always 0.' }),
            image_tokens: Int32({ description: 'Always 0.' }),
          },
          { additionalProperties: false },
        ),
      },
      {
        additionalProperties: false,
        description: "This service's tokens charged (its billing unit), not model tokens.",
      },
    ),
  },
  { $id: 'OpenAiImagesResponse', additionalProperties: false, description: 'OpenAI `ImagesResponse`.' },
);

export const OpenAiErrorBody = Type.Object(
  {
    error: Type.Object(
      {
        message: Type.String({ maxLength: 20_000, description: 'What went wrong; every wrong field is named.' }),
        type: Type.String({
          maxLength: 64,
          description: 'OpenAI error type, e.g. invalid_request_error, insufficient_quota, requests, server_error.',
        }),
        param: Type.Union([Type.String({ maxLength: 64 }), Type.Null()], {
          description: 'The request field at fault.',
        }),
        code: Type.Union([Type.String({ maxLength: 64 }), Type.Null()], {
          description:
            'Stable code, e.g. invalid_api_key, model_not_found, moderation_blocked, rate_limit_exceeded, insufficient_quota.',
        }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'OpenAiError', additionalProperties: false, description: "OpenAI's error shape." },
);

export const OpenAiModel = Type.Object(
  {
    id: Type.String({ enum: MODEL_IDS, description: 'The model name to send as `model`.' }),
    object: Type.Literal('model'),
    created: UnixSeconds('Unix seconds (0: catalog models have no date).'),
    owned_by: Type.String({ maxLength: 64, description: 'Who serves the model.' }),
  },
  { additionalProperties: false, description: 'OpenAI `Model`.' },
);

export const OpenAiModelList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(OpenAiModel, { maxItems: 1000 }),
  },
  { additionalProperties: false, description: 'OpenAI model list.' },
);

/** The shared components of the face (referenced by $id from its routes). */
export const OPENAI_SCHEMAS = [OpenAiImagesResponse, OpenAiErrorBody];
