import { Type, type TSchema } from '@sinclair/typebox';
import { StringEnum } from './model-entry.js';
import { Cursor, Int32, Nullable, Timestamp, UrlString, Uuid } from './primitives.js';
import { Task, WEBHOOK_URL_MAX_LENGTH } from './resources.js';

export const WEBHOOK_EVENT_TYPES = [
  'image.generation.completed',
  'image.generation.failed',
  'image.generation.canceled',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
/** Attempts listed (and kept) per delivery: the most recent ones; older ones are only counted. */
export const MAX_LISTED_ATTEMPTS = 1000;

const WebhookSigningSecret = (description: string) =>
  Type.String({ maxLength: 100, pattern: '^whsec_[A-Za-z0-9+/=]+$', description });

export const WebhookSecret = Type.Object(
  {
    data: Type.Object({
      secret: WebhookSigningSecret('whsec_… key for verifying webhook-signature (Standard Webhooks).'),
      previous_secret_expires_at: Nullable(Timestamp),
    }),
  },
  { $id: 'WebhookSecret' },
);

export const WebhookAttempt = Type.Object(
  {
    attempted_at: Timestamp,
    status_code: Nullable(
      Int32({ minimum: 100, maximum: 599, description: "The receiver's HTTP status; null when none came." }),
    ),
    error: Nullable(Type.String({ maxLength: 1000 })),
    duration_ms: Int32(),
  },
  { $id: 'WebhookAttempt' },
);

export const WebhookDelivery = Type.Object(
  {
    delivery_id: Uuid('Also the webhook-id header of every attempt.'),
    task_id: Uuid('The task the event is about.'),
    event_type: StringEnum(WEBHOOK_EVENT_TYPES),
    url: UrlString(WEBHOOK_URL_MAX_LENGTH),
    status: StringEnum(WEBHOOK_DELIVERY_STATUSES),
    attempts: Type.Array(Type.Ref(WebhookAttempt), {
      maxItems: MAX_LISTED_ATTEMPTS,
      description: 'The most recent attempts, oldest first; older ones are counted in attempt_count.',
    }),
    attempt_count: Int32({ description: 'Every attempt made, including those no longer listed.' }),
    next_attempt_at: Nullable(Timestamp),
    created_at: Timestamp,
  },
  { $id: 'WebhookDelivery' },
);

export const WebhookDeliveryEnvelope = Type.Object(
  { data: Type.Ref(WebhookDelivery) },
  { $id: 'WebhookDeliveryEnvelope' },
);
export const WebhookDeliveryPage = Type.Object(
  {
    data: Type.Array(Type.Ref(WebhookDelivery), { maxItems: 100 }),
    next_cursor: Nullable(Cursor('Pass as `cursor` to read the next page; null on the last page.')),
  },
  { $id: 'WebhookDeliveryPage' },
);

/** The component name of an event's payload schema, e.g. ImageGenerationCompletedEvent. */
export function webhookEventSchemaId(type: WebhookEventType): string {
  return `${type
    .split('.')
    .map((word) => word[0].toUpperCase() + word.slice(1))
    .join('')}Event`;
}

/**
 * The body POSTed to a task's webhook_url, one schema per event type (the OpenAPI `webhooks`).
 * `data` is the task as GET would return it when the attempt was made.
 */
export const WEBHOOK_EVENT_SCHEMAS = WEBHOOK_EVENT_TYPES.map((type) =>
  Type.Object(
    {
      type: Type.Literal(type),
      timestamp: Type.String({ ...Timestamp, description: 'When the task reached its terminal state.' }),
      data: Type.Ref(Task),
    },
    { $id: webhookEventSchemaId(type), additionalProperties: false },
  ),
);

export const WEBHOOK_SCHEMAS: TSchema[] = [
  WebhookSecret,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryEnvelope,
  WebhookDeliveryPage,
  ...WEBHOOK_EVENT_SCHEMAS,
];
