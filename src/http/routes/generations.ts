import type { IncomingMessage } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { RateLimitOptions } from '@fastify/rate-limit';
import { GenerationRequest, MODEL_IDS } from '../../../schemas/catalog.js';
import { StringEnum } from '../../../schemas/model-entry.js';
import { Estimate, TASK_STATUSES, TaskEnvelope, TaskPage } from '../../../schemas/resources.js';
import type { TaskService } from '../../services/task-service.js';
import { IdempotencyKeyHeaders } from '../plugins/idempotency.js';
import { toTaskResource, type MediaUrlSigner } from '../../presenters/resources.js';
import { AUTHENTICATED_PROBLEMS, BEARER_SECURITY, problemResponses, UNEXPECTED_BODY_PROBLEMS, uuidParam } from '../route-schemas.js';

export interface GenerationRoutesOptions {
  tasks: TaskService;
  signer: MediaUrlSigner;
  now: () => Date;
  /** The creates budget (@fastify/rate-limit route config); every other route spends the requests budget. */
  createsRateLimit: RateLimitOptions;
}

const TaskIdParams = uuidParam('task_id', 'The task id returned at creation.');

const WaitQuery = Type.Object(
  { wait: Type.Optional(Type.Integer({ minimum: 0, maximum: 60, description: 'Seconds to wait for a terminal state (long-poll).' })) },
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
 * response closed, cost over a third of a plain read (BENCHMARKS.md, "Optimisations").
 */
const NEVER_ABORTED = new AbortController().signal;
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size.' })),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page.' })),
    status: Type.Optional(StringEnum(TASK_STATUSES)),
    model: Type.Optional(StringEnum(MODEL_IDS)),
    created_after: Type.Optional(Type.String({ format: 'date-time', description: 'Only tasks created strictly after.' })),
    created_before: Type.Optional(Type.String({ format: 'date-time', description: 'Only tasks created strictly before.' })),
  },
  { additionalProperties: false },
);

export const generationRoutes: FastifyPluginAsyncTypebox<GenerationRoutesOptions> = async (app, { tasks, signer, now, createsRateLimit }) => {
  app.post(
    '/images/generations',
    {
      config: { idempotent: true, rateLimit: createsRateLimit },
      schema: {
        operationId: 'createGeneration',
        tags: ['generations'],
        summary: 'Create a generation task',
        description: 'Validates, prices and debits the request, and returns the task at once in state CREATED.',
        security: BEARER_SECURITY,
        headers: IdempotencyKeyHeaders,
        body: GenerationRequest,
        response: {
          202: Type.Ref(TaskEnvelope, { description: 'Task created; `Location` points at it. A replay under the same Idempotency-Key carries `Idempotent-Replayed: true`.' }),
          ...problemResponses(...AUTHENTICATED_PROBLEMS, 402, 409, 413, 415, 422),
        },
      },
    },
    async (request, reply) => {
      const task = await tasks.prepare(request.caller.accountId, request.body);
      const answer = { data: toTaskResource(task, signer, now()) };
      const location = `/api/v1/images/generations/${task.id}`;
      reply.code(202).header('location', location);
      const held = request.idempotency?.held;
      if (!held) {
        await tasks.create(task);
        return answer;
      }
      // The answer a retry under the same key replays, stored with the charge.
      const body = Buffer.from(reply.serialize(answer) as string);
      const headers = { location, 'content-type': JSON_CONTENT_TYPE };
      await tasks.create(task, { ...held, response: { statusCode: 202, headers, body } });
      request.idempotency!.settle();
      return answer;
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
        description: 'With `wait=N` the response is held until the task is terminal or N seconds have passed (long-polling).',
        params: TaskIdParams,
        querystring: WaitQuery,
        response: { 200: Type.Ref(TaskEnvelope), ...problemResponses(...AUTHENTICATED_PROBLEMS, 404) },
      },
    },
    async (request) => {
      const waitMs = (request.query.wait ?? 0) * 1000;
      const disconnected = waitMs > 0 ? abortOnDisconnect(request.raw) : NEVER_ABORTED;
      const task = await tasks.waitForTerminal(request.caller.accountId, request.params.task_id, waitMs, disconnected);
      return { data: toTaskResource(task, signer, now()) };
    },
  );

  app.post(
    '/images/generations/:task_id/cancel',
    {
      schema: {
        operationId: 'cancelGeneration',
        tags: ['generations'],
        summary: 'Cancel a CREATED or IN_PROGRESS task; its cost is refunded',
        security: BEARER_SECURITY,
        params: TaskIdParams,
        response: { 200: Type.Ref(TaskEnvelope), ...problemResponses(...AUTHENTICATED_PROBLEMS, 404, 409, ...UNEXPECTED_BODY_PROBLEMS) },
      },
    },
    async (request) => {
      const task = await tasks.cancel(request.caller.accountId, request.params.task_id);
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
        security: BEARER_SECURITY,
        querystring: ListQuery,
        response: { 200: Type.Ref(TaskPage), ...problemResponses(...AUTHENTICATED_PROBLEMS) },
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
        security: BEARER_SECURITY,
        body: GenerationRequest,
        response: { 200: Type.Ref(Estimate), ...problemResponses(...AUTHENTICATED_PROBLEMS, 413, 415) },
      },
    },
    async (request) => {
      const priced = await tasks.estimate(request.body);
      return {
        data: { model: priced.model.id, cost: priced.cost, parameters: priced.parameters, width: priced.width, height: priced.height },
      };
    },
  );
};
