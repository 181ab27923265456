import { creatingKeyOf } from '../../services/api-keys.js';
import type { IncomingMessage } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { RateLimitOptions } from '@fastify/rate-limit';
import { GenerationRequest, MODEL_IDS } from '../../../schemas/catalog.js';
import { StringEnum } from '../../../schemas/model-entry.js';
import { EXAMPLE_TASK_ID, Timestamp } from '../../../schemas/primitives.js';
import { Estimate, TASK_STATUSES, TaskEnvelope, TaskPage, type TaskResource } from '../../../schemas/resources.js';
import type { TaskRecord } from '../../core/task.js';
import type { GenerationSubmission } from '../../services/generation-submission.js';
import { jsonRequestFingerprint } from '../../services/idempotency.js';
import type { TaskService } from '../../services/task-service.js';
import { IdempotencyKeyHeaders, idempotencyOf, sendStoredResponse } from '../plugins/idempotency.js';
import { toEstimateResource, toTaskResource, type MediaUrlSigner } from '../../presenters/resources.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  IDEMPOTENT_REPLAYED,
  JSON_BODY_CODES,
  LOCATION,
  apiSuccess,
  canonicalId,
  PAGE_QUERY_FIELDS,
  problemResponses,
  uuidParam,
} from '../route-schemas.js';

export interface GenerationRoutesOptions {
  submission: GenerationSubmission;
  tasks: TaskService;
  signer: MediaUrlSigner;
  now: () => Date;
  /** The creates budget (@fastify/rate-limit route config); every other route spends the requests budget. */
  createsRateLimit: RateLimitOptions;
}

const TaskIdParams = uuidParam('task_id', 'The task id returned at creation (either case).', EXAMPLE_TASK_ID);

const WaitQuery = Type.Object(
  {
    wait: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: 0,
        maximum: 60,
        description: 'Seconds to wait for a terminal state (long-poll).',
      }),
    ),
  },
  { additionalProperties: false },
);

/** Aborts when the client goes away, so a long-poll stops waiting for no one. */
function abortOnDisconnect(raw: IncomingMessage): AbortSignal {
  const controller = new AbortController();
  raw.once('close', () => controller.abort());
  return controller.signal;
}

/**
 * For reads that do not wait: a signal per request, aborted with a new DOMException when the
 * response closed, cost over a third of a plain read (docs/performance-history.md, "Optimisations").
 */
const NEVER_ABORTED = new AbortController().signal;
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

const ListQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
    status: Type.Optional(StringEnum(TASK_STATUSES)),
    model: Type.Optional(StringEnum(MODEL_IDS)),
    created_after: Type.Optional(Type.String({ ...Timestamp, description: 'Only tasks created strictly after.' })),
    created_before: Type.Optional(Type.String({ ...Timestamp, description: 'Only tasks created strictly before.' })),
  },
  { additionalProperties: false },
);

const locationOf = (task: TaskRecord) => `/api/v1/images/generations/${task.id}`;

export const generationRoutes: FastifyPluginAsyncTypebox<GenerationRoutesOptions> = async (
  app,
  { submission, tasks, signer, now, createsRateLimit },
) => {
  app.post(
    '/images/generations',
    {
      config: { rateLimit: createsRateLimit },
      schema: {
        operationId: 'createGeneration',
        tags: ['generations'],
        summary: 'Create a generation task',
        description: 'Validates, prices and debits the request, and returns the task at once in state CREATED.',
        security: BEARER_SECURITY,
        headers: IdempotencyKeyHeaders,
        body: GenerationRequest,
        response: {
          202: apiSuccess(
            Type.Ref(TaskEnvelope),
            'Task created; `Location` points at it. A replay under the same Idempotency-Key carries `Idempotent-Replayed: true`.',
            { ...LOCATION('Path of the created task.'), ...IDEMPOTENT_REPLAYED },
          ),
          ...problemResponses([
            ...AUTHENTICATED_CODES,
            ...JSON_BODY_CODES,
            'insufficient_tokens',
            'key_budget_exhausted',
            'model_not_allowed',
            'idempotency_in_progress',
            'invalid_media_reference',
            'resolution_unavailable',
            'idempotency_key_reused',
            'too_many_active_tasks',
          ]),
        },
      },
    },
    async (request, reply) => {
      // Presented once: a replay under the same key answers these very bytes.
      let answer: { data: TaskResource } | undefined;
      const present = (task: TaskRecord) => {
        answer ??= { data: toTaskResource(task, signer, now()) };
        return answer;
      };
      const submitted = await submission.submit({
        accountId: request.caller.accountId,
        key: creatingKeyOf(request.caller),
        request: request.body,
        idempotency: idempotencyOf(request, () =>
          jsonRequestFingerprint('POST', '/api/v1/images/generations', request.body),
        ),
        answerOf: ([task]) => ({
          statusCode: 202,
          headers: { location: locationOf(task), 'content-type': JSON_CONTENT_TYPE },
          // Serialised by this route's 202 schema, as it is sent.
          body: Buffer.from(reply.code(202).serialize(present(task)) as string),
        }),
      });
      if (submitted.replayed) return sendStoredResponse(reply, submitted.response);
      const [task] = submitted.tasks;
      // Only now: a refused create (402, 409, 429) must not point at a task that was never stored.
      reply.code(202).header('location', locationOf(task));
      return present(task);
    },
  );

  app.get(
    '/images/generations/:task_id',
    {
      schema: {
        operationId: 'getGeneration',
        tags: ['generations'],
        summary: 'Read a task',
        security: BEARER_SECURITY,
        description:
          'With `wait=N` the response is held until the task is terminal or N seconds have passed (long-polling).',
        params: TaskIdParams,
        querystring: WaitQuery,
        response: {
          200: apiSuccess(Type.Ref(TaskEnvelope), 'The task.'),
          ...problemResponses([...AUTHENTICATED_CODES, 'not_found']),
        },
      },
    },
    async (request) => {
      const waitMs = (request.query.wait ?? 0) * 1000;
      const disconnected = waitMs > 0 ? abortOnDisconnect(request.raw) : NEVER_ABORTED;
      const taskId = canonicalId(request.params.task_id);
      const task = await tasks.waitForTerminal(request.caller.accountId, taskId, waitMs, disconnected);
      return { data: toTaskResource(task, signer, now()) };
    },
  );

  app.post(
    '/images/generations/:task_id/cancel',
    {
      // A retried cancel under the same key replays the first 200 instead of answering 409
      // invalid_state; the refund is made once either way (the store's refund-once rule).
      config: { idempotent: true },
      schema: {
        operationId: 'cancelGeneration',
        tags: ['generations'],
        summary: 'Cancel a CREATED or IN_PROGRESS task; its cost is refunded',
        description:
          'A task that already reached COMPLETED, FAILED or CANCELED answers 409 `invalid_state` and is not charged or refunded again. ' +
          'With an Idempotency-Key, a retry of a cancel that succeeded replays its 200 (`Idempotent-Replayed: true`).',
        security: BEARER_SECURITY,
        headers: IdempotencyKeyHeaders,
        params: TaskIdParams,
        response: {
          200: apiSuccess(Type.Ref(TaskEnvelope), 'The task, now CANCELED; its cost is refunded.', IDEMPOTENT_REPLAYED),
          ...problemResponses([
            ...AUTHENTICATED_CODES,
            ...JSON_BODY_CODES,
            'not_found',
            'invalid_state',
            'idempotency_in_progress',
            'idempotency_key_reused',
          ]),
        },
      },
    },
    async (request) => {
      const task = await tasks.cancel(request.caller.accountId, canonicalId(request.params.task_id));
      return { data: toTaskResource(task, signer, now()) };
    },
  );

  app.get(
    '/images/generations',
    {
      schema: {
        operationId: 'listGenerations',
        tags: ['generations'],
        summary: "List the account's tasks, newest first",
        description: 'Cursor paged (`next_cursor`); filter by status, model and creation time.',
        security: BEARER_SECURITY,
        querystring: ListQuery,
        response: {
          200: apiSuccess(Type.Ref(TaskPage), 'A page of tasks, newest first.'),
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const page = await tasks.list(request.caller.accountId, {
        limit: q.limit ?? 20,
        cursor: q.cursor,
        status: q.status,
        model: q.model,
        createdAfter: q.created_after ? new Date(q.created_after) : undefined,
        createdBefore: q.created_before ? new Date(q.created_before) : undefined,
      });
      const at = now();
      return { data: page.items.map((t) => toTaskResource(t, signer, at)), next_cursor: page.nextCursor };
    },
  );

  app.post(
    '/images/estimates',
    {
      schema: {
        operationId: 'estimateGeneration',
        tags: ['generations'],
        summary: 'Validate and price a request without creating anything',
        description:
          'Refuses exactly what create would refuse for the same body, image references included; charges nothing.',
        security: BEARER_SECURITY,
        body: GenerationRequest,
        response: {
          200: apiSuccess(Type.Ref(Estimate), 'What a create with this body would cost and produce.'),
          ...problemResponses([
            ...AUTHENTICATED_CODES,
            ...JSON_BODY_CODES,
            'invalid_media_reference',
            'resolution_unavailable',
            'model_not_allowed',
          ]),
        },
      },
    },
    async (request) => {
      const priced = await submission.estimate(request.caller.accountId, request.body, creatingKeyOf(request.caller));
      return { data: toEstimateResource(priced) };
    },
  );
};
