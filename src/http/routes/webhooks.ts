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
import { WebhookReplayRefused } from '../../core/webhook-replay-budget.js';
import { toDeliveryResource, toWebhookSecretResource } from '../../presenters/webhooks.js';
import type { WebhookService } from '../../services/webhook-service.js';
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
  webhooks: WebhookService;
}

const DeliveryListQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
    task_id: Type.Optional(UuidInput('Only deliveries about this task (either case).')),
    status: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATUSES)),
  },
  { additionalProperties: false },
);

export const webhookRoutes: FastifyPluginAsyncTypebox<WebhookRoutesOptions> = async (app, { webhooks }) => {
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
    async (request) => ({ data: toWebhookSecretResource(await webhooks.secrets(request.caller.accountId)) }),
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
    async (request) => ({ data: toWebhookSecretResource(await webhooks.rotateSecret(request.caller.accountId)) }),
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
      const page = await webhooks.deliveries(request.caller.accountId, {
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
      const delivery = await webhooks
        .replay(request.caller.accountId, canonicalId(request.params.delivery_id))
        .catch((error: unknown) => {
          if (error instanceof WebhookReplayRefused && error.retryAfterMs !== null)
            reply.header('retry-after', Math.ceil(error.retryAfterMs / 1000));
          throw error;
        });
      return reply.code(202).send({ data: toDeliveryResource(delivery) });
    },
  );
};
