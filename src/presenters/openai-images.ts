import type { ErrorCode, FieldError } from '../core/errors.js';
import type { OpenAiFieldError } from '../core/openai-images.js';

/**
 * The OpenAI face's answers (decision 0025): errors in OpenAI's shape and statuses, so that the
 * official SDKs raise their usual classes (BadRequestError, AuthenticationError, RateLimitError, …)
 * and retry what they retry. Pure: the route sends what these return.
 */

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface OpenAiError {
  status: number;
  body: OpenAiErrorBody;
  /**
   * The official SDKs obey `x-should-retry`: false where a retry cannot succeed or would charge
   * again (no tokens, a refused prompt, a wait that ran out without an Idempotency-Key).
   */
  shouldRetry?: boolean;
}

interface Mapping {
  status: number;
  type: string;
  code: string | null;
  shouldRetry?: boolean;
}

const INVALID = (status: number, code: string | null = null): Mapping => ({
  status,
  type: 'invalid_request_error',
  code,
});

/** Every error code of the service, as OpenAI would answer it. */
const OPENAI_ERROR_BY_CODE: Record<ErrorCode, Mapping> = {
  invalid_json: INVALID(400, 'invalid_json'),
  invalid_request: INVALID(400),
  unauthorized: INVALID(401, 'invalid_api_key'),
  // OpenAI answers an empty balance with 429 insufficient_quota; nothing was charged.
  insufficient_tokens: { status: 429, type: 'insufficient_quota', code: 'insufficient_quota', shouldRetry: false },
  // A scoped key's budget is a quota like the balance: 429 insufficient_quota, no Retry-After.
  key_budget_exhausted: { status: 429, type: 'insufficient_quota', code: 'insufficient_quota', shouldRetry: false },
  model_not_allowed: { status: 403, type: 'invalid_request_error', code: 'model_not_allowed' },
  account_suspended: { status: 403, type: 'invalid_request_error', code: 'account_suspended' },
  not_found: INVALID(404, 'not_found'),
  invalid_state: INVALID(409, 'invalid_state'),
  idempotency_in_progress: INVALID(409, 'idempotency_in_progress'),
  payload_too_large: INVALID(413, 'payload_too_large'),
  unsupported_media_type: INVALID(415, 'unsupported_media_type'),
  invalid_media_reference: INVALID(400, 'invalid_media_reference'),
  invalid_image: INVALID(400, 'invalid_image'),
  idempotency_key_reused: INVALID(422, 'idempotency_key_reused'),
  resolution_unavailable: INVALID(400, 'resolution_unavailable'),
  rate_limited: { status: 429, type: 'requests', code: 'rate_limit_exceeded' },
  too_many_active_tasks: { status: 429, type: 'requests', code: 'rate_limit_exceeded' },
  too_many_streams: { status: 429, type: 'requests', code: 'rate_limit_exceeded' },
  retry_in_progress: { status: 429, type: 'requests', code: 'rate_limit_exceeded' },
  retry_budget_exhausted: { status: 429, type: 'requests', code: 'rate_limit_exceeded' },
  method_not_allowed: INVALID(405, 'method_not_allowed'),
  request_timeout: INVALID(408, 'request_timeout'),
  headers_too_large: INVALID(431, 'headers_too_large'),
  range_not_satisfiable: INVALID(416, 'range_not_satisfiable'),
  internal_error: { status: 500, type: 'server_error', code: 'internal_error' },
  unavailable: { status: 503, type: 'server_error', code: 'service_unavailable' },
};

/** An error of the service (a DomainError's code, message and field errors) as OpenAI's. */
export function openAiErrorOf(code: ErrorCode, message: string, fieldErrors: readonly FieldError[] = []): OpenAiError {
  const mapping = OPENAI_ERROR_BY_CODE[code];
  const param = fieldErrors.length > 0 ? paramOf(fieldErrors[0]) : null;
  // OpenAI's error has one param; a body with several wrong fields is told of each in the message.
  const text =
    fieldErrors.length > 1 ? fieldErrors.map((e) => `${paramOf(e) ?? 'body'}: ${e.detail}`).join(' ') : message;
  return {
    status: mapping.status,
    body: { error: { message: text, type: mapping.type, param, code: mapping.code ?? codeOfField(fieldErrors) } },
    ...(mapping.shouldRetry === undefined ? {} : { shouldRetry: mapping.shouldRetry }),
  };
}

/** The field errors of an OpenAI body: 400 invalid_request_error naming the first param, every one in the message. */
export function openAiFieldErrors(errors: readonly OpenAiFieldError[]): OpenAiError {
  const message = errors.length === 1 ? errors[0].message : errors.map((e) => `${e.param}: ${e.message}`).join(' ');
  return {
    status: 400,
    body: { error: { message, type: 'invalid_request_error', param: errors[0]?.param ?? null, code: 'invalid_value' } },
    shouldRetry: false,
  };
}

/** An image part of an edit that is not a usable image: OpenAI's 400 invalid_request_error with param `image`. */
export function openAiImagePartError(message: string, code: 'invalid_image_format' | 'invalid_image'): OpenAiError {
  return {
    status: 400,
    body: { error: { message, type: 'invalid_request_error', param: 'image', code } },
    shouldRetry: false,
  };
}

/** OpenAI's 404 for a model it does not have. */
export function openAiModelNotFound(message: string): OpenAiError {
  return {
    status: 404,
    body: { error: { message, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } },
    shouldRetry: false,
  };
}

/**
 * A task that failed after it was admitted (and refunded): a refused prompt is OpenAI's 400
 * moderation_blocked; any other failure a 500 naming the task's code and id.
 */
export function openAiTaskFailure(task: { id: string; error: { code: string; message: string } | null }): OpenAiError {
  const code = task.error?.code ?? 'generation_failed';
  const message = `${task.error?.message ?? 'The generation failed.'} Task ${task.id} failed with ${code}; its tokens were refunded.`;
  if (code === 'content_policy') {
    return {
      status: 400,
      body: { error: { message, type: 'image_generation_user_error', param: 'prompt', code: 'moderation_blocked' } },
      shouldRetry: false,
    };
  }
  return { status: 500, body: { error: { message, type: 'server_error', param: null, code } } };
}

/**
 * The wait ran out: the tasks go on and stay charged until they end. With an Idempotency-Key a
 * retry waits for the same tasks again (no new charge), so the SDKs may retry; without one a
 * retry would make and charge new tasks, so they are told not to.
 */
export function openAiWaitExpired(taskIds: readonly string[], waitSeconds: number, keyed: boolean): OpenAiError {
  return {
    status: 504,
    body: {
      error: {
        message:
          `The images were not ready within ${waitSeconds} s. The tasks go on and are charged as usual: ` +
          `${taskIds.join(', ')}; read them at /api/v1/images/generations/{task_id}` +
          (keyed ? ', or retry with the same Idempotency-Key to wait again.' : '.'),
        type: 'timeout',
        param: null,
        code: 'generation_timeout',
      },
    },
    shouldRetry: keyed,
  };
}

/** `/size` → `size`; `/image/0` → `image`; a header or the whole body → its name or null. */
function paramOf(error: FieldError): string | null {
  const first = error.pointer.split('/')[1];
  return first ? first.replace(/~1/g, '/').replace(/~0/g, '~') : null;
}

function codeOfField(errors: readonly FieldError[]): string | null {
  return errors.length > 0 ? 'invalid_value' : null;
}

export interface OpenAiImageItem {
  b64_json?: string;
  url?: string;
  url_expires_at?: string;
}

/** OpenAI's ImagesResponse for finished tasks; `images` are their generated images, in order. */
export function openAiImagesBody(input: {
  created: Date;
  images: OpenAiImageItem[];
  tasks: readonly { cost: number; width: number; height: number }[];
  quality: string;
  outputFormat: string;
}) {
  const charged = input.tasks.reduce((sum, task) => sum + task.cost, 0);
  const first = input.tasks[0];
  return {
    created: Math.floor(input.created.getTime() / 1000),
    data: input.images,
    size: first ? `${first.width}x${first.height}` : 'auto',
    quality: input.quality,
    output_format: input.outputFormat,
    background: 'opaque' as const,
    usage: {
      input_tokens: 0,
      output_tokens: charged,
      total_tokens: charged,
      input_tokens_details: { text_tokens: 0, image_tokens: 0 },
    },
  };
}

/** OpenAI's model object for a catalog model. */
export function openAiModel(id: string) {
  return { id, object: 'model' as const, created: 0, owned_by: 'imagegen' };
}
