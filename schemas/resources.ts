import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { StringEnum } from './model-entry.js';

/** Shared response schemas; each has an `$id`, which names its OpenAPI component. */

const Timestamp = Type.String({ format: 'date-time' });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

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
  Problem,
];
