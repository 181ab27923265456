import { Type } from '@sinclair/typebox';
import { Problem } from '../../schemas/resources.js';
import { UUID_PATTERN } from '../../schemas/model-entry.js';
import { PROBLEM_CONTENT_TYPE, codesForStatus } from './problem.js';

/**
 * Problem responses for a route, one per status, each documenting the codes it can carry. They are
 * declared under application/problem+json so that the OpenAPI document says what is really sent.
 */
export function problemResponses(...statuses: number[]): Record<number, unknown> {
  const responses: Record<number, unknown> = {};
  for (const status of statuses) {
    responses[status] = {
      description: `Problem: ${codesForStatus(status).map((c) => `\`${c}\``).join(', ')}`,
      content: { [PROBLEM_CONTENT_TYPE.split(';')[0]]: { schema: Type.Ref(Problem) } },
    };
  }
  return responses;
}

/** Statuses every authenticated route can answer with. */
export const AUTHENTICATED_PROBLEMS = [400, 401, 429, 500] as const;

/**
 * A POST or DELETE that takes no body still reads one a client sends: a body of another type than
 * JSON is a 415, and one over the body limit a 413.
 */
export const UNEXPECTED_BODY_PROBLEMS = [413, 415] as const;

export const uuidParam = (name: string, description: string) =>
  Type.Object({ [name]: Type.String({ pattern: UUID_PATTERN, description }) }, { additionalProperties: false });

export const BEARER_SECURITY = [{ bearerAuth: [] }];
