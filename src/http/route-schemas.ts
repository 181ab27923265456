import { Type, type TSchema } from '@sinclair/typebox';
import { Problem, type ErrorCode } from '../../schemas/resources.js';
import { Cursor, UuidInput } from '../../schemas/primitives.js';
import { PROBLEM_BY_CODE, PROBLEM_CONTENT_TYPE } from '../contract/problems.js';

/**
 * Response headers as the OpenAPI document declares them (fastify ignores `headers` in a response
 * schema; @fastify/swagger publishes it). Every response carries the request id and the CORS
 * header; responses of /api/v1 routes also carry the rate-limit headers of the budget they count
 * against (IETF draft names, as @fastify/rate-limit writes them).
 */
interface HeaderSchema {
  type: 'string' | 'integer';
  description: string;
  [keyword: string]: unknown;
}
type Headers = Record<string, HeaderSchema>;

const Seconds = (description: string): HeaderSchema => ({
  type: 'integer',
  format: 'int32',
  minimum: 0,
  maximum: 86_400,
  description,
});

export const COMMON_HEADERS: Headers = {
  'x-request-id': {
    type: 'string',
    maxLength: 128,
    pattern: '^[A-Za-z0-9._:-]+$',
    description:
      "The request id: the caller's own `X-Request-Id` when it was a safe value, else one made here; in every log line.",
  },
  'Access-Control-Allow-Origin': {
    type: 'string',
    enum: ['*'],
    description:
      'Any origin may call the API from a browser; it holds no cookies, the Bearer key is the only credential.',
  },
};

export const RATE_LIMIT_HEADERS: Headers = {
  'RateLimit-Limit': {
    type: 'integer',
    format: 'int32',
    minimum: 0,
    maximum: 2_147_483_647,
    description:
      'Requests allowed per window for the budget this request counted against (per key, or per address before a key is known).',
  },
  'RateLimit-Remaining': {
    type: 'integer',
    format: 'int32',
    minimum: 0,
    maximum: 2_147_483_647,
    description: 'Requests left in the current window.',
  },
  'RateLimit-Reset': Seconds('Seconds until the window resets.'),
};

const RETRY_AFTER: Headers = { 'Retry-After': Seconds('Seconds to wait before retrying.') };
const WWW_AUTHENTICATE: Headers = {
  'WWW-Authenticate': { type: 'string', enum: ['Bearer'], description: 'The scheme to authenticate with.' },
};

export const LOCATION = (description: string): Headers => ({
  Location: { type: 'string', format: 'uri-reference', maxLength: 200, description },
});
export const IDEMPOTENT_REPLAYED: Headers = {
  'Idempotent-Replayed': {
    type: 'string',
    enum: ['true'],
    description: 'Present when this is the stored first response to the same Idempotency-Key, replayed.',
  },
};
export const ETAG: Headers = {
  ETag: {
    type: 'string',
    maxLength: 66,
    pattern: '^"[0-9a-f]{64}"$',
    description: 'The quoted sha256 of the bytes; send it as `If-None-Match`.',
  },
};

/** Headers of a success response of an /api/v1 route: the common ones, the rate-limit ones, and `extra`. */
export const apiHeaders = (extra: Headers = {}) => responseHeaders(true, extra);

/** Headers of a response: the common ones, the rate-limit ones on rate-limited routes, and `extra`. */
function responseHeaders(rateLimited: boolean, extra: Headers = {}): Headers {
  return { ...COMMON_HEADERS, ...(rateLimited ? RATE_LIMIT_HEADERS : {}), ...extra };
}

/**
 * A success response of an /api/v1 route: `schema` (usually a Ref to a shared envelope) with its
 * description and headers. The serializer reads the schema; `headers` is for the document.
 */
export function apiSuccess<T extends TSchema>(schema: T, description: string, extra: Headers = {}): T {
  return { ...schema, description, headers: responseHeaders(true, extra) };
}

/** A response without a body (204, 304) of an /api/v1 route. */
export function apiEmpty(description: string, extra: Headers = {}) {
  return { description, type: 'null', headers: responseHeaders(true, extra) } as const;
}

/** A response of a route outside /api/v1 (not rate-limited by key). */
export function plainResponse<T extends TSchema>(schema: T, description: string, headers: Headers): T {
  return { ...schema, description, headers: { ...COMMON_HEADERS, ...headers } };
}

/**
 * Problem responses for an /api/v1 route: one per status its `codes` map to, each listing exactly
 * the codes this route can answer with. Declared under application/problem+json, what is sent.
 */
export function problemResponses(codes: readonly ErrorCode[]): Record<number, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const { status } = PROBLEM_BY_CODE[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<number, unknown> = {};
  for (const [status, statusCodes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const extra = status === 429 || status === 503 ? RETRY_AFTER : status === 401 ? WWW_AUTHENTICATE : {};
    responses[status] = {
      description: `Problem: ${statusCodes.map((c) => `\`${c}\``).join(', ')}`,
      headers: responseHeaders(status < 500, extra),
      content: { [PROBLEM_CONTENT_TYPE.split(';')[0]]: { schema: Type.Ref(Problem) } },
    };
  }
  return responses;
}

/**
 * Codes any authenticated route can answer with: a bad query, path or header (400), a missing or
 * bad key (401), a spent rate limit (429), a fault (500), and a process shutting down (503).
 */
export const AUTHENTICATED_CODES = [
  'invalid_request',
  'unauthorized',
  'account_suspended',
  'rate_limited',
  'internal_error',
  'unavailable',
] as const;
/** Codes of a POST whose body is parsed as JSON (fastify parses a body sent to any POST or DELETE). */
export const JSON_BODY_CODES = ['invalid_json', 'payload_too_large', 'unsupported_media_type'] as const;

/** The paging fields of every list's query: `limit` (1–100, default 20) and the previous page's `next_cursor`. */
export const PAGE_QUERY_FIELDS = {
  limit: Type.Optional(
    Type.Integer({ format: 'int32', minimum: 1, maximum: 100, default: 20, examples: [20], description: 'Page size.' }),
  ),
  cursor: Type.Optional(Cursor('next_cursor of the previous page.')),
};

export const uuidParam = (name: string, description: string, example: string) =>
  Type.Object({ [name]: UuidInput(description, { examples: [example] }) }, { additionalProperties: false });

/** UUIDs are case-insensitive (RFC 9562); ids are stored and compared in lowercase. */
export const canonicalId = (id: string) => id.toLowerCase();

export const BEARER_SECURITY = [{ bearerAuth: [] }];
/** For routes that need no key (health checks). */
export const NO_SECURITY: [] = [];
