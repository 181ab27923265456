import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { failureOf, problemBody, retryAfterOf } from '../contract/problems.js';

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
  const failure = failureOf(error);
  if (failure.dependency)
    context.log.warn({ err: error, dependency: failure.dependency }, 'tool call failed: a dependency is unavailable');
  else if (failure.code === 'internal_error') context.log.error({ err: error }, 'tool call failed');
  const detail = failure.dependency ? failure.detail.replace('Retry-After', 'retry_after_seconds') : failure.detail;
  const problem = problemBody(failure.code, detail, context.requestId, failure.fieldErrors);
  const retryAfterSeconds = retryAfterOf(problem.status, failure.retryAfterSeconds);
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
