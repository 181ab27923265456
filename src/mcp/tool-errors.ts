import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DomainError, type ErrorCode, type FieldError } from '../core/errors.js';
import {
  DEPENDENCY_DETAIL,
  INTERNAL_ERROR_DETAIL,
  UNAVAILABLE_RETRY_AFTER_SECONDS,
  UNTIMED_429_RETRY_AFTER_SECONDS,
} from '../http/plugins/errors.js';
import { problemBody } from '../http/problem.js';
import { dependencyFailureOf } from '../services/dependency-failure.js';

export interface ToolErrorContext {
  requestId: string;
  log: { warn(details: object, message: string): void; error(details: object, message: string): void };
}

/**
 * The one mapping of a failure to an MCP tool error (`isError: true`): the REST problem details
 * of the same failure (code, detail, field errors with their pointers, status) as a text an agent
 * reads and, second, the problem as JSON, plus the seconds to wait where REST sends Retry-After.
 * What is not a DomainError says nothing about its cause, as a 5xx does not; the log has it.
 */
export function toolErrorOf(error: unknown, context: ToolErrorContext): CallToolResult {
  let code: ErrorCode;
  let detail: string;
  let fieldErrors: FieldError[] = [];
  let retryAfterSeconds: number | null = null;
  const dependency = dependencyFailureOf(error);
  if (dependency) {
    context.log.warn({ err: error, dependency }, 'tool call failed: a dependency is unavailable');
    code = 'unavailable';
    detail = DEPENDENCY_DETAIL.replace('Retry-After', 'retry_after_seconds');
  } else if (error instanceof DomainError) {
    ({ code, message: detail, fieldErrors } = error);
    // A refusal that knows its wait (a backend's circuit, a rate-limit window) says it, as Retry-After does.
    const { retryAfterSeconds: knownWait } = error as DomainError & { retryAfterSeconds?: unknown };
    if (typeof knownWait === 'number') retryAfterSeconds = knownWait;
  } else {
    context.log.error({ err: error }, 'tool call failed');
    code = 'internal_error';
    detail = INTERNAL_ERROR_DETAIL;
  }
  const problem = problemBody(code, detail, context.requestId, fieldErrors);
  if (retryAfterSeconds === null && problem.status === 429) retryAfterSeconds = UNTIMED_429_RETRY_AFTER_SECONDS;
  if (retryAfterSeconds === null && problem.status === 503) retryAfterSeconds = UNAVAILABLE_RETRY_AFTER_SECONDS;
  const lines = [
    `Error ${problem.code}: ${problem.detail}`,
    ...(problem.errors ?? []).map((e) => `- ${e.pointer || '(arguments)'} (${e.code}): ${e.detail}`),
    ...(retryAfterSeconds === null ? [] : [`Retry after ${retryAfterSeconds} s.`]),
  ];
  const payload = retryAfterSeconds === null ? problem : { ...problem, retry_after_seconds: retryAfterSeconds };
  return {
    isError: true,
    content: [
      { type: 'text', text: lines.join('\n') },
      { type: 'text', text: JSON.stringify(payload) },
    ],
  };
}
