import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { StringEnum } from './model-entry.js';
import { Nullable, Timestamp } from './primitives.js';

/** Shared response schemas; each has an `$id`, which names its OpenAPI component. */


export const TASK_STATUSES = ['CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export const TaskStatus = StringEnum(TASK_STATUSES, { $id: 'TaskStatus', description: 'Task state; COMPLETED, FAILED and CANCELED are terminal.' });

export const GeneratedItem = Type.Object(
  {
    media_id: Type.String(),
    url: Type.String({ description: 'Signed download URL; works without the API key until url_expires_at.' }),
    url_expires_at: Timestamp,
    content_type: Type.String(),
    width: Type.Integer(),
    height: Type.Integer(),
    size_bytes: Type.Integer(),
    resized_from: Nullable(
      Type.Object(
        { width: Type.Integer(), height: Type.Integer() },
        {
          additionalProperties: false,
          description:
            'The size the model returned when it differed from the catalog\'s: the image was scaled to cover width × height and centre-cropped. Null when the model returned the exact size.',
        },
      ),
    ),
  },
  { $id: 'GeneratedItem', additionalProperties: false },
);

export const TaskError = Type.Object(
  { code: Type.String(), message: Type.String() },
  { $id: 'TaskError', additionalProperties: false },
);

export const Task = Type.Object(
  {
    task_id: Type.String({ description: 'UUIDv7' }),
    status: Type.Ref(TaskStatus),
    cost: Type.Integer({ description: 'Price in tokens, debited at creation; refunded if the task fails or is canceled.' }),
    generated: Type.Array(Type.Ref(GeneratedItem)),
    model: Type.String(),
    prompt: Type.String(),
    image_reference: Type.Array(Type.String()),
    parameters: Type.Object(
      { aspect_ratio: Type.String(), resolution: Type.String() },
      { additionalProperties: false, description: 'Effective values, defaults applied.' },
    ),
    webhook_url: Nullable(Type.String()),
    error: Nullable(Type.Ref(TaskError)),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    completed_at: Nullable(Timestamp),
  },
  { $id: 'Task', additionalProperties: false },
);
export type TaskResource = Static<typeof Task>;

export const TaskEnvelope = Type.Object({ data: Type.Ref(Task) }, { $id: 'TaskEnvelope' });
export const TaskPage = Type.Object(
  { data: Type.Array(Type.Ref(Task)), next_cursor: Nullable(Type.String()) },
  { $id: 'TaskPage' },
);

export const Estimate = Type.Object(
  {
    data: Type.Object({
      model: Type.String(),
      cost: Type.Integer(),
      parameters: Type.Object({ aspect_ratio: Type.String(), resolution: Type.String() }),
      width: Type.Integer(),
      height: Type.Integer(),
    }),
  },
  { $id: 'Estimate' },
);

export const ModelResource = Type.Object(
  {
    id: Type.String(),
    description: Type.String(),
    prompt_length: Type.Object({ min: Type.Integer(), max: Type.Integer() }),
    image_reference_count: Type.Object({ min: Type.Integer(), max: Type.Integer() }),
    aspect_ratios: Type.Array(Type.String()),
    resolutions: Type.Array(Type.String()),
    defaults: Type.Object({ aspect_ratio: Type.String(), resolution: Type.String() }),
    prices: Type.Record(Type.String(), Type.Integer(), { description: 'Tokens per resolution.' }),
    pixel_sizes: Type.Record(
      Type.String(),
      Type.Record(Type.String(), Type.Object({ width: Type.Integer(), height: Type.Integer() })),
      { description: 'pixel_sizes[aspect_ratio][resolution]' },
    ),
  },
  { $id: 'Model' },
);
export const ModelEnvelope = Type.Object({ data: Type.Ref(ModelResource) }, { $id: 'ModelEnvelope' });
export const ModelList = Type.Object({ data: Type.Array(Type.Ref(ModelResource)) }, { $id: 'ModelList' });

export const LEDGER_KINDS = ['grant', 'debit', 'refund'] as const;
export const LedgerEntryResource = Type.Object(
  {
    id: Type.String({ description: 'Entry id; entries are listed newest first.' }),
    kind: StringEnum(LEDGER_KINDS, { description: '`grant` adds tokens, `debit` pays for a task at creation, `refund` returns a failed or canceled task\'s cost.' }),
    amount: Type.Integer({ minimum: 1, description: 'Tokens moved; always positive, `kind` says which way.' }),
    balance_after: Type.Integer({ minimum: 0, description: 'The balance right after this entry.' }),
    task_id: Nullable(Type.String({ description: 'The task a debit or refund belongs to.' })),
    note: Nullable(Type.String()),
    created_at: Timestamp,
  },
  { $id: 'LedgerEntry', additionalProperties: false },
);
export const LedgerPage = Type.Object(
  { data: Type.Array(Type.Ref(LedgerEntryResource)), next_cursor: Nullable(Type.String()) },
  { $id: 'LedgerPage', additionalProperties: false },
);

export const AccountResource = Type.Object(
  {
    account_id: Type.String(),
    balance: Type.Integer({ minimum: 0, description: 'Tokens available; grants − debits + refunds.' }),
    key: Type.Object(
      {
        key_id: Type.String(),
        name: Type.String(),
        prefix: Type.String({ description: 'The first characters of the key, enough to tell keys apart; never the key.' }),
      },
      { additionalProperties: false, description: 'The API key that made this request.' },
    ),
    limits: Type.Object(
      {
        creates_per_min: Type.Integer({ description: 'Creates per minute allowed to this key.' }),
        requests_per_min: Type.Integer({ description: 'Other requests per minute allowed to this key.' }),
        max_active_tasks: Type.Integer({ description: 'CREATED + IN_PROGRESS tasks the account may have at once.' }),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'Account', additionalProperties: false },
);
export const AccountEnvelope = Type.Object({ data: Type.Ref(AccountResource) }, { $id: 'AccountEnvelope', additionalProperties: false });

export const MEDIA_SOURCES = ['upload', 'generated'] as const;
export const MediaResource = Type.Object(
  {
    media_id: Type.String({ description: 'UUIDv7; use it in `image_reference` (uploads only).' }),
    content_type: StringEnum(['image/png', 'image/jpeg', 'image/webp'], { description: 'Decided by the bytes, never by the filename or the declared type.' }),
    width: Type.Integer({ description: 'Pixels, after EXIF orientation was applied.' }),
    height: Type.Integer({ description: 'Pixels, after EXIF orientation was applied.' }),
    size_bytes: Type.Integer({ description: 'Size of the stored bytes (re-encoded without metadata), not of the upload.' }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'Hex SHA-256 of the stored bytes; also the ETag of the content.' }),
    source: StringEnum(MEDIA_SOURCES),
    created_at: Timestamp,
    expires_at: Type.String({ format: 'date-time', description: 'After this the media is gone: 404 here, 422 as a reference.' }),
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
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: StringEnum(ERROR_CODES, { description: 'Stable machine-readable error code.' }),
    request_id: Type.String(),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          pointer: Type.String({ description: 'JSON Pointer into the request part named by `location`.' }),
          location: StringEnum(['body', 'query', 'path', 'header']),
          code: Type.String(),
          detail: Type.String(),
        }),
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
  Task,
  TaskEnvelope,
  TaskPage,
  Estimate,
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
