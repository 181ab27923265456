import type { ErrorCode } from '../core/errors.js';
import type { FieldError } from '../core/errors.js';
import { PROBLEM_TEXT_MAX_LENGTH, type ProblemBody } from '../../schemas/resources.js';

/** HTTP status and title of each stable error code (docs/design.md §3.7); the only place codes meet HTTP. */
export const PROBLEM_BY_CODE: Record<ErrorCode, { status: number; title: string }> = {
  invalid_json: { status: 400, title: 'Invalid JSON' },
  invalid_request: { status: 400, title: 'Invalid request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  insufficient_tokens: { status: 402, title: 'Insufficient tokens' },
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
