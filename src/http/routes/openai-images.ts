import { creatingKeyOf } from '../../services/api-keys.js';
import { rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import multipart from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { RateLimitOptions } from '@fastify/rate-limit';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { MAX_IMAGE_REFERENCES, MODEL_IDS, findModel } from '../../../schemas/catalog.js';
import {
  OpenAiErrorBody,
  OpenAiImageEditBody,
  OpenAiImageGenerationBody,
  OpenAiImagesResponse,
  OpenAiModel,
  OpenAiModelList,
} from '../../../schemas/openai.js';
import { Type } from '@sinclair/typebox';
import { DomainError } from '../../core/errors.js';
import { readOpenAiImageRequest, type OpenAiImageRequest } from '../../core/openai-images.js';
import {
  openAiErrorOf,
  openAiFieldErrors,
  openAiImagePartError,
  openAiImagesBody,
  openAiModel,
  openAiModelNotFound,
  openAiTaskFailure,
  openAiWaitExpired,
  type OpenAiError,
  type OpenAiImageItem,
} from '../../presenters/openai-images.js';
import type { MediaUrlSigner } from '../../presenters/resources.js';
import { canonicalJson, jsonRequestFingerprint, requestFingerprint } from '../../services/idempotency.js';
import type { MediaService } from '../../services/media-service.js';
import type { OpenAiImagesOutcome, OpenAiImagesService } from '../../services/openai-images.js';
import type { TaskRecord } from '../../core/task.js';
import { EDIT_IMAGE_FIELDS, editParserOptions, receiveEditBody } from '../openai-edit-body.js';
import { classify } from '../plugins/errors.js';
import { IdempotencyKeyHeaders, idempotencyOf, REPLAYED_HEADER } from '../plugins/idempotency.js';
import { BEARER_SECURITY, COMMON_HEADERS, RATE_LIMIT_HEADERS } from '../route-schemas.js';

/**
 * The OpenAI Images API face under /v1 (decision 0025). Thin: the body is read by
 * core/openai-images, the tasks made and waited for by services/openai-images, and every answer
 * and error shaped by presenters/openai-images. This scope has its own error handler, so that
 * every failure here, auth and rate limits included, leaves in OpenAI's error shape.
 */
export interface OpenAiImagesRoutesOptions {
  images: OpenAiImagesService;
  media: MediaService;
  signer: MediaUrlSigner;
  now: () => Date;
  createsRateLimit: RateLimitOptions;
  uploadTempDir: string;
  uploadMaxBytes: number;
  uploadIdleTimeoutMs: number;
  onStorageFull?: () => void;
}

/** An answer decided by the face itself (a field error, model_not_found, a failed task, a timeout). */
class OpenAiAnswer extends Error {
  constructor(readonly answer: OpenAiError) {
    super(answer.body.error.message);
  }
}

export const TASK_IDS_HEADER = 'x-imagegen-task-ids';
const UNTIMED_RETRY_AFTER_SECONDS = 5;
const JSON_TYPE = 'application/json; charset=utf-8';
const DEPENDENCY_MESSAGE =
  'The service cannot complete this request right now. Retry after the time in Retry-After; a request retried with the same Idempotency-Key is never charged twice.';

/** The body is read by readOpenAiImageRequest (unknown fields ignored, every wrong one named), not by Ajv. */
const readByTheFace = () => () => true;

const ERROR_STATUSES = [400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500, 503, 504] as const;
const RETRY_AFTER = {
  type: 'integer',
  format: 'int32',
  minimum: 0,
  maximum: 86_400,
  description: 'Seconds to wait before retrying.',
};
const SHOULD_RETRY = {
  type: 'string',
  enum: ['true', 'false'],
  description: 'Whether a retry can succeed (the official SDKs obey it).',
};

function errorResponses(statuses: readonly number[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      {
        description: `OpenAI error (${status})`,
        headers: {
          ...COMMON_HEADERS,
          ...(status < 500 ? RATE_LIMIT_HEADERS : {}),
          ...(status === 429 || status === 503 || status === 409 ? { 'Retry-After': RETRY_AFTER } : {}),
          'x-should-retry': SHOULD_RETRY,
        },
        content: { 'application/json': { schema: Type.Ref(OpenAiErrorBody) } },
      },
    ]),
  );
}

const IMAGES_SUCCESS = {
  ...Type.Ref(OpenAiImagesResponse),
  description: 'The images, once every task finished.',
  headers: {
    ...COMMON_HEADERS,
    ...RATE_LIMIT_HEADERS,
    [TASK_IDS_HEADER]: {
      type: 'string',
      maxLength: 400,
      description: 'The ids of the tasks made (comma-separated), as /api/v1/images/generations lists them.',
    },
    'Idempotent-Replayed': {
      type: 'string',
      enum: ['true'],
      description: 'Present when a retry with the same Idempotency-Key waited for the tasks of the first request.',
    },
  },
};

export const openAiImagesRoutes: FastifyPluginAsyncTypebox<OpenAiImagesRoutesOptions> = async (app, options) => {
  const { images, signer, now } = options;

  // Why no route of this face takes a request: 405 with Allow, or 404, in OpenAI's shape.
  const sendUnrouted = (request: FastifyRequest, reply: FastifyReply) => {
    const { code, detail, allow } = app.unrouted(request);
    if (allow.length > 0) reply.header('allow', allow.join(', '));
    const served = 'this face serves /v1/images/generations, /v1/images/edits and /v1/models.';
    return sendOpenAiError(
      reply,
      openAiErrorOf(code, code === 'not_found' ? `${detail.slice(0, -1)}; ${served}` : detail),
    );
  };

  app.setErrorHandler((error: FastifyError | DomainError | OpenAiAnswer, request, reply) => {
    if (error instanceof OpenAiAnswer) return sendOpenAiError(reply, error.answer);
    // A request no route takes can fail its body's checks first (a QUERY without a Content-Type).
    if (request.is404) return sendUnrouted(request, reply);
    if ((error as FastifyError).code === 'FST_FILES_LIMIT') {
      const detail = `An edit takes at most ${MAX_IMAGE_REFERENCES} images, and no other files.`;
      return sendOpenAiError(
        reply,
        openAiErrorOf('invalid_request', detail, [{ pointer: '/image', location: 'body', code: 'too_many', detail }]),
      );
    }
    const failure = classify(error, request, { onStorageFull: options.onStorageFull });
    if (failure.retryAfterSeconds !== null) reply.header('retry-after', failure.retryAfterSeconds);
    const detail = failure.dependency ? DEPENDENCY_MESSAGE : failure.detail;
    return sendOpenAiError(reply, openAiErrorOf(failure.code, detail, failure.fieldErrors));
  });

  app.setNotFoundHandler(sendUnrouted);

  /** Runs an admitted request to its answer: the images, or the error of a failed task or a spent wait. */
  async function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    asked: OpenAiImageRequest,
    keyed: boolean,
    run: (signal: AbortSignal) => Promise<OpenAiImagesOutcome>,
  ) {
    // The images take longer than HTTP_IDLE_TIMEOUT_MS; the wait is bounded by OPENAI_COMPAT_WAIT_SECONDS.
    (request.raw.socket as Socket | undefined)?.setTimeout?.(0);
    const outcome = await run(abortWhenClientLeaves(reply));
    const taskIds = outcome.outcome === 'waiting' ? outcome.taskIds : outcome.tasks.map((task) => task.id);
    reply.header(TASK_IDS_HEADER, taskIds.join(','));
    if (outcome.replayed) reply.header(REPLAYED_HEADER, 'true');
    if (outcome.outcome === 'waiting') throw new OpenAiAnswer(openAiWaitExpired(taskIds, images.waitSeconds, keyed));
    // A task that failed was refunded; the images of the others were paid for and are answered.
    const completed = outcome.tasks.filter((task) => task.status === 'COMPLETED');
    if (completed.length === 0) throw new OpenAiAnswer(openAiTaskFailure(failureOf(outcome.tasks[0])));
    const at = now();
    const items: OpenAiImageItem[] = [];
    for (const task of completed) {
      for (const generated of task.generated) {
        if (asked.responseFormat === 'url') {
          const signed = signer.signedUrl(generated.media_id, at);
          items.push({ url: signed.url, url_expires_at: signed.expiresAt.toISOString() });
        } else {
          const bytes = await images.imageBytes(request.caller.accountId, generated.media_id);
          items.push({ b64_json: bytes.toString('base64') });
        }
      }
    }
    reply.type(JSON_TYPE);
    return openAiImagesBody({
      created: at,
      images: items,
      tasks: completed,
      quality: asked.quality,
      outputFormat: asked.outputFormat,
    });
  }

  function accepted(body: unknown, referenceImages?: number): OpenAiImageRequest {
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw new OpenAiAnswer(openAiFieldErrors([{ param: 'body', message: 'The body must be a JSON object.' }]));
    const reading = readOpenAiImageRequest(body as Record<string, unknown>, { referenceImages });
    if (reading.outcome === 'model_not_found') throw new OpenAiAnswer(openAiModelNotFound(reading.message));
    if (reading.outcome === 'invalid') throw new OpenAiAnswer(openAiFieldErrors(reading.errors));
    return reading.request;
  }

  app.post(
    '/images/generations',
    {
      config: { rateLimit: options.createsRateLimit },
      validatorCompiler: readByTheFace,
      schema: {
        operationId: 'openaiCreateImage',
        tags: ['openai'],
        summary: 'OpenAI images.generate: make n images and answer with them',
        description:
          'n tasks, priced and charged as native tasks (all or none), waited for up to OPENAI_COMPAT_WAIT_SECONDS. ' +
          'Send an `Idempotency-Key` so that an SDK retry waits for the same tasks instead of paying for new ones. ' +
          'Past the wait: 504 `generation_timeout` naming the tasks, which go on (and stay charged unless they fail).',
        security: BEARER_SECURITY,
        headers: IdempotencyKeyHeaders,
        body: OpenAiImageGenerationBody,
        response: { 200: IMAGES_SUCCESS, ...errorResponses(ERROR_STATUSES) },
      },
    },
    async (request, reply) => {
      const asked = accepted(request.body);
      const idempotency = idempotencyOf(request, () =>
        jsonRequestFingerprint('POST', '/v1/images/generations', request.body),
      );
      return answer(request, reply, asked, idempotency !== null, (signal) =>
        images.generate({
          accountId: request.caller.accountId,
          key: creatingKeyOf(request.caller),
          request: asked,
          idempotency,
          signal,
        }),
      );
    },
  );

  // The edit parses multipart/form-data in a scope of its own; nothing else here does.
  await app.register(async (edits) => {
    edits.removeAllContentTypeParsers();
    await edits.register(multipart, editParserOptions(options.uploadMaxBytes, MAX_IMAGE_REFERENCES));
    edits.post(
      '/images/edits',
      {
        config: { rateLimit: options.createsRateLimit },
        validatorCompiler: readByTheFace,
        schema: {
          operationId: 'openaiEditImage',
          tags: ['openai'],
          summary: 'OpenAI images.edit: make n images from reference images',
          description:
            `The images (parts \`${EDIT_IMAGE_FIELDS.join('` or `')}\`) are stored as uploads of the account and become the tasks' image references; ` +
            'the rest is as images.generate. A `mask` is refused (400, param `mask`).',
          security: BEARER_SECURITY,
          consumes: ['multipart/form-data'],
          headers: IdempotencyKeyHeaders,
          body: OpenAiImageEditBody,
          response: { 200: IMAGES_SUCCESS, ...errorResponses(ERROR_STATUSES) },
        },
      },
      async (request, reply) => {
        const received = await receiveEditBody(request, {
          tempDir: options.uploadTempDir,
          maxBytes: options.uploadMaxBytes,
          maxImages: MAX_IMAGE_REFERENCES,
          idleTimeoutMs: options.uploadIdleTimeoutMs,
        }).catch((error: unknown) => {
          // The rest of the body may still be on its way; closing is cheaper than reading it.
          reply.header('connection', 'close');
          throw error;
        });
        try {
          const asked = accepted(received.fields, received.images.length);
          const idempotency = idempotencyOf(request, () =>
            requestFingerprint(
              'POST',
              '/v1/images/edits',
              canonicalJson({ fields: received.fields, images: received.images.map((image) => image.sha256) }),
            ),
          );
          const accountId = request.caller.accountId;
          return await answer(request, reply, asked, idempotency !== null, (signal) =>
            images.generate({
              accountId,
              key: creatingKeyOf(request.caller),
              request: asked,
              idempotency,
              referenceUploads: received.images.map((image, index) => async () => {
                try {
                  return (await options.media.createUpload(accountId, image.path)).id;
                } catch (error) {
                  throw imagePartRefusal(error, index) ?? error;
                }
              }),
              signal,
            }),
          );
        } finally {
          await Promise.all(received.images.map((image) => rm(image.path, { force: true })));
        }
      },
    );
  });

  app.get(
    '/models',
    {
      schema: {
        operationId: 'openaiListModels',
        tags: ['openai'],
        summary: 'OpenAI models.list: the models of the catalog',
        description: "The catalog's models in OpenAI's list shape, so that an OpenAI client can discover them.",
        security: BEARER_SECURITY,
        response: {
          200: {
            ...OpenAiModelList,
            description: 'Every model.',
            headers: { ...COMMON_HEADERS, ...RATE_LIMIT_HEADERS },
          },
          ...errorResponses([400, 401, 403, 429, 500, 503]),
        },
      },
    },
    async () => ({ object: 'list' as const, data: MODEL_IDS.map(openAiModel) }),
  );

  app.get(
    '/models/:model',
    {
      schema: {
        operationId: 'openaiGetModel',
        tags: ['openai'],
        summary: 'OpenAI models.retrieve: one model of the catalog',
        description: "One model of the catalog in OpenAI's shape; another name is 404 `model_not_found`.",
        security: BEARER_SECURITY,
        params: Type.Object({
          model: Type.String({
            // The router's longest path parameter (fastify's maxParamLength); past it, a 400.
            maxLength: 100,
            examples: [MODEL_IDS[0]],
            description: `One of ${MODEL_IDS.join(', ')}.`,
          }),
        }),
        response: {
          200: { ...OpenAiModel, description: 'The model.', headers: { ...COMMON_HEADERS, ...RATE_LIMIT_HEADERS } },
          ...errorResponses([400, 401, 403, 404, 429, 500, 503]),
        },
      },
    },
    async (request) => {
      const model = findModel(request.params.model);
      if (!model)
        throw new OpenAiAnswer(
          openAiModelNotFound(
            `The model '${request.params.model.slice(0, 64)}' does not exist. The models this service offers: ${MODEL_IDS.join(', ')}.`,
          ),
        );
      return openAiModel(model.id);
    },
  );
};

function sendOpenAiError(reply: FastifyReply, answer: OpenAiError): FastifyReply {
  const { status } = answer;
  if (status === 401) reply.header('www-authenticate', 'Bearer');
  // A spent quota (the balance, a key's budget) has no time to wait for: no Retry-After, as OpenAI,
  // so that no client waits to be refused again.
  const quota = answer.body.error.type === 'insufficient_quota' || answer.body.error.code === 'insufficient_quota';
  if (quota) reply.removeHeader('retry-after');
  else if ((status === 429 || status === 503) && !reply.hasHeader('retry-after'))
    reply.header('retry-after', UNTIMED_RETRY_AFTER_SECONDS);
  if (answer.shouldRetry !== undefined) reply.header('x-should-retry', String(answer.shouldRetry));
  return reply.code(status).type(JSON_TYPE).send(answer.body);
}

/**
 * An image part that is not a PNG, JPEG or WebP image (or cannot be decoded) is OpenAI's 400
 * invalid_request_error naming `image`, as OpenAI answers it; null for any other failure.
 */
function imagePartRefusal(error: unknown, index: number): OpenAiAnswer | null {
  if (!(error instanceof DomainError)) return null;
  if (error.code !== 'unsupported_media_type' && error.code !== 'invalid_image') return null;
  const what =
    error.code === 'invalid_image' ? 'could not be decoded; it may be truncated or corrupt' : 'is not an image';
  return new OpenAiAnswer(
    openAiImagePartError(
      `Invalid file 'image' (part ${index + 1}): it ${what}. Supported formats are PNG, JPEG and WebP.`,
      error.code === 'invalid_image' ? 'invalid_image' : 'invalid_image_format',
    ),
  );
}

/** Aborts when the connection closes before the answer was sent: the wait stops, the tasks go on. */
function abortWhenClientLeaves(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

function failureOf(task: TaskRecord): { id: string; error: { code: string; message: string } | null } {
  if (task.error) return task;
  return {
    id: task.id,
    error: {
      code: task.status === 'CANCELED' ? 'canceled' : 'generation_failed',
      message: `The task ended ${task.status}.`,
    },
  };
}
