import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { StringEnum } from '../../../schemas/model-entry.js';
import { EXAMPLE_TASK_ID, UuidInput } from '../../../schemas/primitives.js';
import {
  WEBHOOK_DELIVERY_STATUSES,
  WebhookDeliveryEnvelope,
  WebhookDeliveryPage,
  WebhookSecret,
} from '../../../schemas/webhooks.js';
import { WebhookReplayRefused, type WebhookReplayBudget } from '../../core/webhook-replay-budget.js';
import type { WebhookDeliveryWithAttempts, Store } from '../../store/port.js';
import { generateWebhookSecret } from '../../webhooks/send-webhook.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  JSON_BODY_CODES,
  apiSuccess,
  canonicalId,
  PAGE_QUERY_FIELDS,
  problemResponses,
  uuidParam,
} from '../route-schemas.js';

export interface WebhookRoutesOptions {
  store: Pick<Store, 'webhooks'>;
  now: () => Date;
  /** Wakes this process's dispatcher after a replay; absent in an API-only process. */
  onDeliveryQueued?: () => void;
  replayBudget: WebhookReplayBudget;
}

/** How long a rotated-out secret still signs deliveries, so receivers can switch without a gap. */
export const WEBHOOK_SECRET_ROTATION_GRACE_MS = 24 * 3600_000;

const DeliveryListQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
    task_id: Type.Optional(UuidInput('Only deliveries about this task (either case).')),
    status: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATUSES)),
  },
  { additionalProperties: false },
);

function toDeliveryResource(d: WebhookDeliveryWithAttempts) {
  return {
    delivery_id: d.id,
    task_id: d.taskId,
    event_type: d.eventType,
    url: d.url,
    status: d.status,
    attempt_count: d.attempts,
    attempts: d.attemptLog.map((a) => ({
      attempted_at: a.attemptedAt.toISOString(),
      status_code: a.statusCode,
      // An error can quote the receiver's host name; the resource promises at most 1000 characters.
      error: a.error === null ? null : a.error.slice(0, 1000),
      duration_ms: a.durationMs,
    })),
    next_attempt_at: d.status === 'pending' && d.nextAttemptAt ? d.nextAttemptAt.toISOString() : null,
    created_at: d.createdAt.toISOString(),
  };
}

export const webhookRoutes: FastifyPluginAsyncTypebox<WebhookRoutesOptions> = async (
  app,
  { store, now, onDeliveryQueued, replayBudget },
) => {
  const secretResponse = (secrets: { current: string; previousExpiresAt: Date | null }) => ({
    data: { secret: secrets.current, previous_secret_expires_at: secrets.previousExpiresAt?.toISOString() ?? null },
  });

  app.get(
    '/webhooks/secret',
    {
      schema: {
        operationId: 'getWebhookSecret',
        tags: ['webhooks'],
        summary: "The account's webhook signing secret",
        description:
          'The `whsec_` key that signs every webhook of this account (Standard Webhooks); made on first read.',
        security: BEARER_SECURITY,
        response: {
          200: apiSuccess(Type.Ref(WebhookSecret), 'The signing secret.'),
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request) =>
      secretResponse(await store.webhooks.webhookSecrets(request.caller.accountId, now(), generateWebhookSecret)),
  );

  app.post(
    '/webhooks/secret/rotate',
    {
      schema: {
        operationId: 'rotateWebhookSecret',
        tags: ['webhooks'],
        summary: 'Replace the signing secret; the old one keeps signing (second signature) for 24 h',
        description:
          'For a leaked secret: deliveries carry a second signature with the old secret for 24 h, so receivers can switch without a gap.',
        security: BEARER_SECURITY,
        response: {
          200: apiSuccess(Type.Ref(WebhookSecret), 'The new signing secret.'),
          ...problemResponses([...AUTHENTICATED_CODES, ...JSON_BODY_CODES]),
        },
      },
    },
    async (request) =>
      secretResponse(
        await store.webhooks.rotateWebhookSecret(
          request.caller.accountId,
          now(),
          WEBHOOK_SECRET_ROTATION_GRACE_MS,
          generateWebhookSecret,
        ),
      ),
  );

  app.get(
    '/webhooks/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['webhooks'],
        summary: 'Webhook deliveries with every attempt, newest first',
        description:
          'One delivery per terminal event of a task with a webhook_url, each attempt with its status code or error; filter by task or status.',
        security: BEARER_SECURITY,
        querystring: DeliveryListQuery,
        response: {
          200: apiSuccess(Type.Ref(WebhookDeliveryPage), 'A page of deliveries, newest first.'),
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const page = await store.webhooks.listWebhookDeliveries(request.caller.accountId, {
        limit: q.limit ?? 20,
        cursor: q.cursor,
        taskId: q.task_id === undefined ? undefined : canonicalId(q.task_id),
        status: q.status,
      });
      return { data: page.items.map(toDeliveryResource), next_cursor: page.nextCursor };
    },
  );

  app.post(
    '/webhooks/deliveries/:delivery_id/retry',
    {
      schema: {
        operationId: 'retryWebhookDelivery',
        tags: ['webhooks'],
        summary: 'Send a delivery again now (same webhook-id)',
        description:
          'Queues the delivery for an immediate attempt, whatever its state; receivers see the same webhook-id and can drop repeats. One replay at a time per delivery (429 `retry_in_progress` while one is queued or being sent), within a budget per delivery and per account per hour (429 `retry_budget_exhausted` with `Retry-After`).',
        security: BEARER_SECURITY,
        params: uuidParam('delivery_id', 'A delivery_id from the delivery log (either case).', EXAMPLE_TASK_ID),
        response: {
          202: apiSuccess(Type.Ref(WebhookDeliveryEnvelope), 'The delivery, queued to be sent now.'),
          ...problemResponses([
            ...AUTHENTICATED_CODES,
            ...JSON_BODY_CODES,
            'not_found',
            'retry_in_progress',
            'retry_budget_exhausted',
          ]),
        },
      },
    },
    async (request, reply) => {
      const delivery = await store.webhooks
        .replayWebhookDelivery(request.caller.accountId, canonicalId(request.params.delivery_id), now(), replayBudget)
        .catch((error: unknown) => {
          if (error instanceof WebhookReplayRefused && error.retryAfterMs !== null)
            reply.header('retry-after', Math.ceil(error.retryAfterMs / 1000));
          throw error;
        });
      onDeliveryQueued?.();
      return reply.code(202).send({ data: toDeliveryResource(delivery) });
    },
  );
};
