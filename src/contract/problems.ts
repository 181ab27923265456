import { DomainError, RetryLaterError, type ErrorCode, type FieldError } from '../core/errors.js';
import { dependencyFailureOf, type DependencyFailure } from '../services/dependency-failure.js';
import { PROBLEM_TEXT_MAX_LENGTH, type ProblemBody } from '../../schemas/resources.js';

/**
 * The problems of the contract (docs/design.md §3.7), for every face: what a failure means as a
 * stable code, its status, its body, and how long to wait before a retry. The native API sends
 * them as problem+json, the MCP tools as tool errors, the OpenAI face in OpenAI's error shape; each
 * shapes what is decided here and decides nothing of its own.
 */

/** HTTP status and title of each stable error code (docs/design.md §3.7); the only place codes meet a status. */
export const PROBLEM_BY_CODE: Record<ErrorCode, { status: number; title: string }> = {
  invalid_json: { status: 400, title: 'Invalid JSON' },
  invalid_request: { status: 400, title: 'Invalid request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  insufficient_tokens: { status: 402, title: 'Insufficient tokens' },
  key_budget_exhausted: { status: 402, title: 'Key budget exhausted' },
  model_not_allowed: { status: 403, title: 'Model not allowed' },
  account_suspended: { status: 403, title: 'Account suspended' },
  not_found: { status: 404, title: 'Not found' },
  invalid_state: { status: 409, title: 'Invalid state' },
  idempotency_in_progress: { status: 409, title: 'Idempotent request in progress' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  invalid_media_reference: { status: 422, title: 'Invalid media reference' },
  invalid_image: { status: 422, title: 'Invalid image' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  resolution_unavailable: { status: 422, title: 'Resolution unavailable' },
  rate_limited: { status: 429, title: 'Rate limited' },
  too_many_active_tasks: { status: 429, title: 'Too many active tasks' },
  too_many_streams: { status: 429, title: 'Too many open event streams' },
  retry_in_progress: { status: 429, title: 'Replay in progress' },
  retry_budget_exhausted: { status: 429, title: 'Replay budget exhausted' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  request_timeout: { status: 408, title: 'Request timeout' },
  headers_too_large: { status: 431, title: 'Request header fields too large' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  internal_error: { status: 500, title: 'Internal error' },
  unavailable: { status: 503, title: 'Service unavailable' },
};

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

export function problemBody(
  code: ErrorCode,
  detail: string,
  requestId: string,
  fieldErrors?: FieldError[],
): ProblemBody {
  const { status, title } = PROBLEM_BY_CODE[code];
  return {
    type: `urn:imagegen:problem:${code}`,
    title,
    status,
    detail: clip(detail),
    code,
    request_id: requestId,
    ...(fieldErrors && fieldErrors.length > 0
      ? { errors: fieldErrors.map((e) => ({ ...e, pointer: clip(e.pointer), detail: clip(e.detail) })) }
      : {}),
  };
}

/**
 * Texts that quote the request (an unknown field's name can be as long as the body) are cut to the
 * length the Problem schema promises.
 */
function clip(text: string): string {
  return text.length <= PROBLEM_TEXT_MAX_LENGTH ? text : `${text.slice(0, PROBLEM_TEXT_MAX_LENGTH - 1)}…`;
}

/** One segment of a JSON Pointer (RFC 6901): "~" and "/" in a key are written "~0" and "~1". */
export function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Tasks of the local renderer finish in well under this, so it is a sensible first retry after a
 * 429 that has no window to wait out, rather than a promise.
 */
export const UNTIMED_429_RETRY_AFTER_SECONDS = 5;

/**
 * A 503 for a dependency that is away (a failover, a storage blip) or full: long enough for a
 * failover or a pooler restart to finish, short enough that a retrying client is not kept waiting.
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
export const DEPENDENCY_DETAIL =
  'The service cannot complete this request right now. Retry after the time in Retry-After; a create retried with the same Idempotency-Key is never charged twice.';
export const INTERNAL_ERROR_DETAIL = 'Something went wrong on our side; the request id identifies it in our logs.';

/** A failure as the contract names it, before any face shapes it. */
export interface Failure {
  code: ErrorCode;
  detail: string;
  fieldErrors?: FieldError[];
  /** The seconds the refusal itself knows to wait (a backend's circuit, a rate-limit window), else null. */
  retryAfterSeconds: number | null;
  /** Set when a dependency is away or full: not a bug, and not the client's fault (503). */
  dependency: DependencyFailure | null;
}

/**
 * What any error thrown by a use case means: a dependency away or full is 503 `unavailable`; a
 * DomainError is its own code; anything else is a 500 that says nothing of its cause (the log has
 * it). Errors of a face's own framework (fastify's parser, multipart limits) are classified by that
 * face first.
 */
export function failureOf(error: unknown): Failure {
  const dependency = dependencyFailureOf(error);
  if (dependency) return { code: 'unavailable', detail: DEPENDENCY_DETAIL, retryAfterSeconds: null, dependency };
  if (error instanceof DomainError)
    return {
      code: error.code,
      detail: error.message,
      fieldErrors: error.fieldErrors,
      retryAfterSeconds: error instanceof RetryLaterError ? error.retryAfterSeconds : null,
      dependency: null,
    };
  return { code: 'internal_error', detail: INTERNAL_ERROR_DETAIL, retryAfterSeconds: null, dependency: null };
}

/**
 * The wait a refusal with this status announces (Retry-After, or MCP's retry_after_seconds): its
 * own when it knows one; every 429 and 503 has one (docs/design.md §3.7), the rest none.
 */
export function retryAfterOf(status: number, known: number | null): number | null {
  if (known !== null) return known;
  if (status === 429) return UNTIMED_429_RETRY_AFTER_SECONDS;
  if (status === 503) return UNAVAILABLE_RETRY_AFTER_SECONDS;
  return null;
}
