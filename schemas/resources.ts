import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ALL_ASPECT_RATIOS, ALL_RESOLUTIONS, MAX_IMAGE_REFERENCES, MAX_PROMPT_LENGTH, MODEL_IDS } from './catalog.js';
import { Seed, StringEnum } from './model-entry.js';
import { OUTPUT_COMPRESSION_DESCRIPTION, OUTPUT_FORMATS } from './output-format.js';
import { Cursor, Int32, Nullable, Timestamp, TokenAmount, UrlString, Uuid } from './primitives.js';

/** Shared response schemas; each has an `$id`, which names its OpenAPI component. */

/**
 * The most field errors one problem lists: enough for every field of the largest body, few
 * enough that a hostile body cannot make a large answer.
 */
export const MAX_FIELD_ERRORS = 20;

export const IMAGE_CONTENT_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
/** Images a task can produce (docs/design.md §3.3); more than one per task is room for models that return several. */
export const MAX_GENERATED_PER_TASK = 16;
/** Signed URLs: PUBLIC_BASE_URL, the path and two short query parameters. */
const SIGNED_URL_MAX_LENGTH = 4096;
export const WEBHOOK_URL_MAX_LENGTH = 2048;
const PAGE_MAX_ITEMS = 100;
const NextCursor = Nullable(Cursor('Pass as `cursor` to read the next page; null on the last page.'));

export const TASK_STATUSES = ['CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export const TaskStatus = StringEnum(TASK_STATUSES, {
  $id: 'TaskStatus',
  description: 'Task state; COMPLETED, FAILED and CANCELED are terminal.',
});

export const GeneratedItem = Type.Object(
  {
    media_id: Uuid('The generated image; GET /api/v1/media/{media_id} reads its record.'),
    url: UrlString(SIGNED_URL_MAX_LENGTH, 'Signed download URL; works without the API key until url_expires_at.'),
    url_expires_at: Timestamp,
    content_type: StringEnum(IMAGE_CONTENT_TYPES),
    width: Int32({ minimum: 1, description: 'Pixels.' }),
    height: Int32({ minimum: 1, description: 'Pixels.' }),
    size_bytes: TokenAmount({ minimum: 1, description: 'Bytes.' }),
    resized_from: Nullable(
      Type.Object(
        { width: Int32({ minimum: 1 }), height: Int32({ minimum: 1 }) },
        {
          additionalProperties: false,
          description:
            "The size the model returned when it differed from the catalog's: the image was scaled to cover " +
            'width × height and centre-cropped. Null when the model returned the exact size.',
        },
      ),
    ),
  },
  { $id: 'GeneratedItem', additionalProperties: false },
);

export const TASK_ERROR_MESSAGE_MAX_LENGTH = 1000;
export const TaskError = Type.Object(
  {
    code: Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'Stable machine-readable reason.' }),
    message: Type.String({ maxLength: TASK_ERROR_MESSAGE_MAX_LENGTH }),
  },
  { $id: 'TaskError', additionalProperties: false },
);

/** A task's parameters as it runs: what the request said, defaults applied. */
export const EffectiveParameters = Type.Object(
  {
    aspect_ratio: StringEnum(ALL_ASPECT_RATIOS),
    resolution: StringEnum(ALL_RESOLUTIONS),
    output_format: StringEnum(OUTPUT_FORMATS, {
      description: 'Encoding of the result; `png` for tasks created before output formats existed.',
    }),
    output_compression: Nullable(
      Int32({ minimum: 0, maximum: 100, description: `${OUTPUT_COMPRESSION_DESCRIPTION} null with png.` }),
    ),
    seed: Nullable(
      Seed(
        'The seed the task is made with: the one asked for, or the one drawn for it. null in an estimate without a seed ' +
          '(a create draws one), and for tasks created before seeds were recorded.',
      ),
    ),
  },
  { $id: 'EffectiveParameters', additionalProperties: false, description: 'Effective values, defaults applied.' },
);

export const Task = Type.Object(
  {
    task_id: Uuid('UUIDv7'),
    status: Type.Ref(TaskStatus),
    cost: TokenAmount({
      description: 'Price in tokens, debited at creation; refunded if the task fails or is canceled.',
    }),
    generated: Type.Array(Type.Ref(GeneratedItem), { maxItems: MAX_GENERATED_PER_TASK }),
    model: StringEnum(MODEL_IDS),
    prompt: Type.String({ maxLength: MAX_PROMPT_LENGTH }),
    image_reference: Type.Array(Uuid('An uploaded media_id.'), {
      maxItems: MAX_IMAGE_REFERENCES,
      description: 'Empty for text-to-image.',
    }),
    parameters: Type.Ref(EffectiveParameters),
    webhook_url: Nullable(Type.String({ maxLength: WEBHOOK_URL_MAX_LENGTH })),
    error: Nullable(Type.Ref(TaskError)),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
    stream_url: UrlString(
      SIGNED_URL_MAX_LENGTH,
      "Signed URL of the task's event stream (Server-Sent Events); works without the API key, e.g. in a browser's EventSource, until stream_url_expires_at.",
    ),
    stream_url_expires_at: Timestamp,
  },
  { $id: 'Task', additionalProperties: false },
);
export type TaskResource = Static<typeof Task>;

export const TaskEnvelope = Type.Object({ data: Type.Ref(Task) }, { $id: 'TaskEnvelope' });
export const TaskPage = Type.Object(
  { data: Type.Array(Type.Ref(Task), { maxItems: PAGE_MAX_ITEMS }), next_cursor: NextCursor },
  { $id: 'TaskPage' },
);

export const Estimate = Type.Object(
  {
    data: Type.Object({
      model: StringEnum(MODEL_IDS),
      cost: TokenAmount({ description: 'Tokens a create with this body would debit.' }),
      parameters: Type.Ref(EffectiveParameters),
      width: Int32({ minimum: 1 }),
      height: Int32({ minimum: 1 }),
    }),
  },
  { $id: 'Estimate' },
);

const Pixels = Type.Object(
  { width: Int32({ minimum: 1 }), height: Int32({ minimum: 1 }) },
  { additionalProperties: false },
);
const Bounds = (description: string) =>
  Type.Object({ min: Int32({ minimum: 0 }), max: Int32({ minimum: 0 }) }, { additionalProperties: false, description });
/** An object keyed by some of `keys`: a model lists only what it offers. */
const KeyedBy = <T extends TSchema>(keys: readonly string[], value: T, description?: string) =>
  Type.Object(Object.fromEntries(keys.map((k) => [k, Type.Optional(value)])), {
    additionalProperties: false,
    ...(description ? { description } : {}),
  });

/** How the configured backend serves one catalog size (src/core/size-plan.ts; MAX_UPSCALE). */
export const NativeSize = Type.Object(
  {
    width: Int32({ minimum: 1, description: 'Width of the image the backend generates for this size.' }),
    height: Int32({ minimum: 1, description: 'Height of the image the backend generates for this size.' }),
    result: StringEnum(['native', 'resized', 'unavailable'], {
      description:
        '`native`: generated at the catalog size itself; `resized`: generated at width × height, then scaled to cover the catalog size and centre-cropped (the task says `resized_from`); `unavailable`: it would need a larger enlargement than this service allows, and a create asking for it is refused (422 `resolution_unavailable`) before any charge.',
    }),
    scale: Type.Number({
      minimum: 0,
      description:
        'Linear factor the generated image is scaled by to cover the catalog size: 1 as generated, above 1 an enlargement, below 1 a reduction.',
    }),
  },
  { $id: 'NativeSize', additionalProperties: false },
);

export const ModelResource = Type.Object(
  {
    id: StringEnum(MODEL_IDS),
    description: Type.String({ maxLength: 500 }),
    prompt_length: Bounds('Prompt length in Unicode code points.'),
    image_reference_count: Bounds('References allowed for image-to-image.'),
    aspect_ratios: Type.Array(StringEnum(ALL_ASPECT_RATIOS), { maxItems: ALL_ASPECT_RATIOS.length }),
    resolutions: Type.Array(StringEnum(ALL_RESOLUTIONS), { maxItems: ALL_RESOLUTIONS.length }),
    output_formats: Type.Array(StringEnum(OUTPUT_FORMATS), {
      maxItems: OUTPUT_FORMATS.length,
      description: 'Encodings of the result this model offers (`parameters.output_format`); all at the same price.',
    }),
    defaults: Type.Object({ aspect_ratio: StringEnum(ALL_ASPECT_RATIOS), resolution: StringEnum(ALL_RESOLUTIONS) }),
    prices: KeyedBy(ALL_RESOLUTIONS, TokenAmount(), 'Tokens per offered resolution.'),
    pixel_sizes: KeyedBy(ALL_ASPECT_RATIOS, KeyedBy(ALL_RESOLUTIONS, Pixels), 'pixel_sizes[aspect_ratio][resolution]'),
    native_sizes: KeyedBy(
      ALL_ASPECT_RATIOS,
      KeyedBy(ALL_RESOLUTIONS, Type.Ref(NativeSize)),
      'native_sizes[aspect_ratio][resolution]: what the backend configured for this model generates for each size of pixel_sizes, and whether the result is that image as generated, resized, or not offered.',
    ),
  },
  { $id: 'Model' },
);
export const ModelEnvelope = Type.Object({ data: Type.Ref(ModelResource) }, { $id: 'ModelEnvelope' });
export const ModelList = Type.Object(
  { data: Type.Array(Type.Ref(ModelResource), { maxItems: MODEL_IDS.length }) },
  { $id: 'ModelList' },
);

export const LEDGER_KINDS = ['grant', 'debit', 'refund'] as const;
export const LEDGER_NOTE_MAX_LENGTH = 500;
export const KEY_NAME_MAX_LENGTH = 200;
export const LedgerEntryResource = Type.Object(
  {
    id: Uuid('Entry id; entries are listed newest first.'),
    kind: StringEnum(LEDGER_KINDS, {
      description:
        "`grant` adds tokens, `debit` pays for a task at creation, `refund` returns a failed or canceled task's cost.",
    }),
    amount: TokenAmount({ minimum: 1, description: 'Tokens moved; always positive, `kind` says which way.' }),
    balance_after: TokenAmount({ description: 'The balance right after this entry.' }),
    task_id: Nullable(Uuid('The task a debit or refund belongs to.')),
    note: Nullable(Type.String({ maxLength: LEDGER_NOTE_MAX_LENGTH })),
    created_at: Timestamp,
  },
  { $id: 'LedgerEntry', additionalProperties: false },
);
export const LedgerPage = Type.Object(
  { data: Type.Array(Type.Ref(LedgerEntryResource), { maxItems: PAGE_MAX_ITEMS }), next_cursor: NextCursor },
  { $id: 'LedgerPage', additionalProperties: false },
);

export const AccountResource = Type.Object(
  {
    account_id: Uuid('The account the key belongs to.'),
    balance: TokenAmount({ description: 'Tokens available; grants − debits + refunds.' }),
    key: Type.Object(
      {
        key_id: Uuid('The key; `keys revoke` takes it.'),
        name: Type.String({ maxLength: KEY_NAME_MAX_LENGTH }),
        prefix: Type.String({
          maxLength: 12,
          pattern: '^igk_[A-Za-z0-9_-]*$',
          description: 'The first characters of the key, enough to tell keys apart; never the key.',
        }),
      },
      { additionalProperties: false, description: 'The API key that made this request.' },
    ),
    limits: Type.Object(
      {
        creates_per_min: Int32({ description: 'Creates per minute allowed to this key.' }),
        requests_per_min: Int32({ description: 'Other requests per minute allowed to this key.' }),
        max_active_tasks: Int32({ description: 'CREATED + IN_PROGRESS tasks the account may have at once.' }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'Account', additionalProperties: false },
);
export const AccountEnvelope = Type.Object(
  { data: Type.Ref(AccountResource) },
  { $id: 'AccountEnvelope', additionalProperties: false },
);

export const MEDIA_SOURCES = ['upload', 'generated'] as const;
export const MediaResource = Type.Object(
  {
    media_id: Uuid('UUIDv7; use it in `image_reference` (uploads only).'),
    content_type: StringEnum(IMAGE_CONTENT_TYPES, {
      description: 'Decided by the bytes, never by the filename or the declared type.',
    }),
    width: Int32({ minimum: 1, description: 'Pixels, after EXIF orientation was applied.' }),
    height: Int32({ minimum: 1, description: 'Pixels, after EXIF orientation was applied.' }),
    size_bytes: TokenAmount({
      minimum: 1,
      description: 'Size of the stored bytes (re-encoded without metadata), not of the upload.',
    }),
    sha256: Type.String({
      minLength: 64,
      maxLength: 64,
      pattern: '^[0-9a-f]{64}$',
      description: 'Hex SHA-256 of the stored bytes; also the ETag of the content.',
    }),
    source: StringEnum(MEDIA_SOURCES),
    created_at: Timestamp,
    expires_at: Type.String({
      ...Timestamp,
      description: 'After this the media is gone: 404 here, 422 as a reference.',
    }),
  },
  { $id: 'Media', additionalProperties: false },
);
export type MediaResource = Static<typeof MediaResource>;
export const MediaEnvelope = Type.Object({ data: Type.Ref(MediaResource) }, { $id: 'MediaEnvelope' });

export const ERROR_CODES = [
  'invalid_json',
  'invalid_request',
  'unauthorized',
  'insufficient_tokens',
  'not_found',
  'invalid_state',
  'idempotency_in_progress',
  'payload_too_large',
  'unsupported_media_type',
  'invalid_media_reference',
  'invalid_image',
  'idempotency_key_reused',
  'rate_limited',
  'too_many_active_tasks',
  'internal_error',
  'unavailable',
  'method_not_allowed',
  'request_timeout',
  'headers_too_large',
  'range_not_satisfiable',
  'too_many_streams',
  'retry_in_progress',
  'retry_budget_exhausted',
  'resolution_unavailable',
  'model_not_allowed',
  'key_budget_exhausted',
  'account_suspended',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];
/** Problem texts are cut to this length (a field name in a pointer can be as long as the body). */
export const PROBLEM_TEXT_MAX_LENGTH = 1000;

export const Problem = Type.Object(
  {
    type: Type.String({ format: 'uri', maxLength: 100, description: '`urn:imagegen:problem:<code>`' }),
    title: Type.String({ maxLength: 100 }),
    status: Int32({ minimum: 400, maximum: 599 }),
    detail: Type.String({ maxLength: PROBLEM_TEXT_MAX_LENGTH }),
    code: StringEnum(ERROR_CODES, { description: 'Stable machine-readable error code.' }),
    request_id: Type.String({
      maxLength: 128,
      pattern: '^[A-Za-z0-9._:-]+$',
      description: 'Also the `x-request-id` response header.',
    }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          pointer: Type.String({
            maxLength: PROBLEM_TEXT_MAX_LENGTH,
            description: 'JSON Pointer into the request part named by `location`.',
          }),
          location: StringEnum(['body', 'query', 'path', 'header']),
          code: Type.String({
            maxLength: 64,
            pattern: '^[a-z0-9_]+$',
            description: 'Field-level reason, e.g. `required`, `too_long`.',
          }),
          detail: Type.String({ maxLength: PROBLEM_TEXT_MAX_LENGTH }),
        }),
        {
          maxItems: MAX_FIELD_ERRORS,
          description: `The field errors: one per invalid field, at most ${MAX_FIELD_ERRORS}.`,
        },
      ),
    ),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' },
);
export type ProblemBody = Static<typeof Problem>;

export const SHARED_SCHEMAS: TSchema[] = [
  TaskStatus,
  GeneratedItem,
  TaskError,
  EffectiveParameters,
  Task,
  TaskEnvelope,
  TaskPage,
  Estimate,
  NativeSize,
  ModelResource,
  ModelEnvelope,
  ModelList,
  LedgerEntryResource,
  LedgerPage,
  AccountResource,
  AccountEnvelope,
  MediaResource,
  MediaEnvelope,
  Problem,
];
