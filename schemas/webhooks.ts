import { Type, type TSchema } from '@sinclair/typebox';
import { StringEnum } from './model-entry.js';
import { Nullable, Timestamp } from './primitives.js';


export const WEBHOOK_EVENT_TYPES = ['image.generation.completed', 'image.generation.failed', 'image.generation.canceled'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

export const WebhookSecret = Type.Object(
  {
    data: Type.Object({
      secret: Type.String({ description: 'whsec_… key for verifying webhook-signature (Standard Webhooks).' }),
      previous_secret_expires_at: Nullable(Timestamp),
    }),
  },
  { $id: 'WebhookSecret' },
);

export const WebhookAttempt = Type.Object(
  {
    attempted_at: Timestamp,
    status_code: Nullable(Type.Integer()),
    error: Nullable(Type.String()),
    duration_ms: Type.Integer(),
  },
  { $id: 'WebhookAttempt' },
);

export const WebhookDelivery = Type.Object(
  {
    delivery_id: Type.String({ description: 'Also the webhook-id header of every attempt.' }),
    task_id: Type.String(),
    event_type: StringEnum(WEBHOOK_EVENT_TYPES),
    url: Type.String(),
    status: StringEnum(WEBHOOK_DELIVERY_STATUSES),
    attempts: Type.Array(Type.Ref(WebhookAttempt)),
    next_attempt_at: Nullable(Timestamp),
    created_at: Timestamp,
  },
  { $id: 'WebhookDelivery' },
);

export const WebhookDeliveryEnvelope = Type.Object({ data: Type.Ref(WebhookDelivery) }, { $id: 'WebhookDeliveryEnvelope' });
export const WebhookDeliveryPage = Type.Object(
  { data: Type.Array(Type.Ref(WebhookDelivery)), next_cursor: Nullable(Type.String()) },
  { $id: 'WebhookDeliveryPage' },
);

export const WEBHOOK_SCHEMAS: TSchema[] = [WebhookSecret, WebhookAttempt, WebhookDelivery, WebhookDeliveryEnvelope, WebhookDeliveryPage];
