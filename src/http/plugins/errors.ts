import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import Router from 'find-my-way';
import { DomainError, type ErrorCode, type FieldError } from '../../core/errors.js';
import {
  failureOf,
  PROBLEM_BY_CODE,
  PROBLEM_CONTENT_TYPE,
  problemBody,
  retryAfterOf,
  type Failure,
} from '../../contract/problems.js';
import { invalidRequestOf } from '../../contract/validation.js';
import { openAiErrorOf } from '../../presenters/openai-images.js';

/**
 * The one error handler: every failure, ours or fastify's, leaves as application/problem+json
 * (docs/design.md §3.7). 5xx bodies say nothing about the cause; the log has it with the request id.
 */
export function registerErrorHandling(app: FastifyInstance, hooks: { onStorageFull?: () => void } = {}): void {
  app.setErrorHandler((error: FastifyError | DomainError, request, reply) => {
    // A request no route takes fails its body's checks before the not-found handler sees it (a
    // QUERY without a Content-Type): what it is told is that the path or method is not served.
    if (request.is404) return sendUnrouted(request, reply);
    const { code, detail, fieldErrors, retryAfterSeconds } = classify(error, request, hooks);
    if (retryAfterSeconds !== null && !reply.hasHeader('retry-after')) reply.header('retry-after', retryAfterSeconds);
    sendProblem(request, reply, code, detail, fieldErrors);
  });

  // Every route's path and method, so that a path served for other methods gets 405 with Allow
  // rather than 404: fastify's router tells only that nothing matched. The same router library as
  // fastify's, so the two agree on what a path matches.
  const routes = Router({ ignoreTrailingSlash: true });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat().map((m) => m.toUpperCase() as Router.HTTPMethod)) {
      if (!routes.hasRoute(method, route.url)) routes.on(method, route.url, () => {});
    }
  });
  app.decorate('unrouted', (request: FastifyRequest): Unrouted => {
    const path = request.url.split('?')[0];
    const allowed = ALL_METHODS.filter((method) => routes.find(method, path) !== null);
    if (allowed.length === 0)
      return { code: 'not_found', detail: `No route for ${request.method} ${path}.`, allow: [] };
    const detail = `${request.method} is not allowed on ${path}; it takes ${allowed.join(', ')}.`;
    return { code: 'method_not_allowed', detail, allow: allowed };
  });

  const sendUnrouted = (request: FastifyRequest, reply: FastifyReply) => {
    const { code, detail, allow } = app.unrouted(request);
    if (allow.length > 0) reply.header('allow', allow.join(', '));
    return sendProblem(request, reply, code, detail);
  };
  app.setNotFoundHandler(sendUnrouted);
}

/** What a request that no route takes is told: 405 with the methods its path takes, or 404. */
export interface Unrouted {
  code: 'not_found' | 'method_not_allowed';
  detail: string;
  /** The methods the path takes (the Allow header of a 405); empty for a 404. */
  allow: string[];
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Why no route takes this request (registerErrorHandling): every face answers it in its own shape. */
    unrouted(request: FastifyRequest): Unrouted;
  }
}

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Fastify's `frameworkErrors`: errors its router raises before any route is chosen (a path that
 * does not decode, a path parameter longer than the router keeps), answered like every other
 * error instead of with fastify's own JSON.
 */
export const frameworkErrorHandler: NonNullable<FastifyServerOptions['frameworkErrors']> = (error, request, reply) => {
  const detail =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? 'A path segment is longer than any id this API issues.'
      : 'The path is not valid: it holds a percent-encoding that does not decode to UTF-8.';
  reply.header('x-request-id', request.id);
  const fieldErrors: FieldError[] = [{ pointer: '', location: 'path', code: 'invalid_format', detail }];
  // The OpenAI face answers in OpenAI's error shape, even before a route of it is chosen.
  if (request.url.startsWith(OPENAI_FACE_PREFIX)) {
    const answer = openAiErrorOf('invalid_request', detail, fieldErrors);
    (reply as FastifyReply).code(answer.status).type('application/json; charset=utf-8').send(answer.body);
    return;
  }
  sendProblem(request, reply, 'invalid_request', detail, fieldErrors);
};

/** Where the OpenAI Images face is mounted (src/http/routes/openai-images.ts). */
export const OPENAI_FACE_PREFIX = '/v1/';

/**
 * Fastify's `clientErrorHandler`, for what Node's HTTP parser refuses before there is a request
 * (a malformed request line or header, Content-Length with Transfer-Encoding, a bad chunk, headers
 * over the size limit, a request not received in time). Node and fastify answer those with bodies
 * of their own; this writes the same problem+json as every other error, then closes the
 * connection, whose framing can no longer be trusted.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already begun on this connection cannot be followed by another one.
  const inProgress = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inProgress?.headersSent) {
    const [code, detail] = CLIENT_ERRORS[error.code ?? ''] ?? CLIENT_ERRORS.default;
    const requestId = randomUUID();
    const status = PROBLEM_BY_CODE[code].status;
    // The OpenAI face answers in OpenAI's error shape, even before there is a request: its path is
    // read from the request line the parser received, where it got that far.
    const openAi = requestPathOf(error).startsWith(OPENAI_FACE_PREFIX);
    const body = JSON.stringify(openAi ? openAiErrorOf(code, detail).body : problemBody(code, detail, requestId));
    const contentType = openAi ? 'application/json; charset=utf-8' : PROBLEM_CONTENT_TYPE;
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${contentType}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroySoon();
}

/** The path of the request line Node's parser was given (`rawPacket`), or '' where there is none. */
function requestPathOf(error: NodeJS.ErrnoException): string {
  const raw = (error as { rawPacket?: unknown }).rawPacket;
  if (!Buffer.isBuffer(raw)) return '';
  const requestLine = raw.subarray(0, Math.min(raw.length, 2048)).toString('latin1').split('\r\n', 1)[0];
  return /^[A-Z]+ (\/\S*) HTTP\/1\.[01]$/.exec(requestLine)?.[1] ?? '';
}

const CLIENT_ERRORS: Record<string, [ErrorCode, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: ['request_timeout', 'The request was not received in time; the connection is closed.'],
  HPE_HEADER_OVERFLOW: ['headers_too_large', 'The request line and headers are larger than this server accepts.'],
  default: ['invalid_request', 'The request is not well-formed HTTP/1.1; the connection is closed.'],
};

export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  fieldErrors?: FieldError[],
): FastifyReply {
  const body = problemBody(code, detail, String(request.id), fieldErrors);
  if (code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
  // Every 429 and 503 tells the client when to come back. The rate limits set their window's end;
  // the rest (too_many_active_tasks, a dependency away) have no window to wait for.
  const retryAfter = reply.hasHeader('retry-after') ? null : retryAfterOf(body.status, null);
  if (retryAfter !== null) reply.header('retry-after', retryAfter);
  return reply.code(body.status).type(PROBLEM_CONTENT_TYPE).send(body);
}

type Classified = Pick<Failure, 'code' | 'detail' | 'fieldErrors'>;

const CODE_BY_FASTIFY_ERROR: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_CONTENT_TYPE: 'unsupported_media_type',
};

const UPLOAD_PART = '/file';
const uploadProblem = (code: ErrorCode, pointer: string, fieldCode: string, detail: string): Classified => ({
  code,
  detail,
  fieldErrors: [{ pointer, location: 'body', code: fieldCode, detail }],
});

/** @fastify/multipart's errors: its limits (docs/design.md §3.8) are the contract's 413 and 400, not its own 413/406 for everything. */
const MULTIPART_PROBLEMS: Record<string, Classified> = {
  FST_REQ_FILE_TOO_LARGE: uploadProblem(
    'payload_too_large',
    UPLOAD_PART,
    'too_large',
    'The file is larger than this endpoint accepts.',
  ),
  FST_FILES_LIMIT: uploadProblem(
    'invalid_request',
    UPLOAD_PART,
    'too_many_parts',
    'Send exactly one file, in the part named "file".',
  ),
  FST_FIELDS_LIMIT: uploadProblem(
    'invalid_request',
    '',
    'too_many_parts',
    'The body has more parts than an upload takes: one, named "file".',
  ),
  FST_PARTS_LIMIT: uploadProblem(
    'invalid_request',
    '',
    'too_many_parts',
    'The body has more parts than an upload takes: one, named "file".',
  ),
  FST_PROTO_VIOLATION: uploadProblem('invalid_request', '', 'not_allowed', 'A part has a name that is not allowed.'),
  FST_INVALID_JSON_FIELD_ERROR: uploadProblem(
    'invalid_request',
    '',
    'invalid',
    'A part declared as JSON is not valid JSON.',
  ),
  FST_INVALID_MULTIPART_CONTENT_TYPE: {
    code: 'unsupported_media_type',
    detail: 'This endpoint accepts multipart/form-data bodies.',
  },
};

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'invalid_request',
  408: 'request_timeout',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  431: 'headers_too_large',
  503: 'unavailable',
};

/**
 * What an error of a request means, for the native API and the OpenAI face alike: fastify's own
 * errors (validation, the body parsers, multipart limits) read here, everything else by the
 * contract's failureOf. Logs what is not the client's doing: a dependency away (a warning: not a
 * bug; the client is told to come back, the cause stays here) or a 500 (an error).
 */
export function classify(
  error: FastifyError | DomainError,
  request: FastifyRequest,
  hooks: { onStorageFull?: () => void } = {},
): Failure {
  const failure = fastifyFailureOf(error, request) ?? failureOf(error);
  if (failure.dependency) {
    if (failure.dependency === 'storage_full') hooks.onStorageFull?.();
    request.log.warn({ err: error, dependency: failure.dependency }, 'request failed: a dependency is unavailable');
  } else if (PROBLEM_BY_CODE[failure.code].status >= 500) request.log.error({ err: error }, 'request failed');
  return failure;
}

function fastifyFailureOf(error: FastifyError | DomainError, request: FastifyRequest): Failure | null {
  if (error instanceof DomainError) return null;
  const known = (classified: Classified): Failure => ({ ...classified, retryAfterSeconds: null, dependency: null });
  if (error.validation) {
    const invalid = invalidRequestOf(error.validation as never, error.validationContext);
    return known({ code: invalid.code, detail: invalid.message, fieldErrors: invalid.fieldErrors });
  }
  const multipartProblem = error.code ? MULTIPART_PROBLEMS[error.code] : undefined;
  if (multipartProblem) return known(multipartProblem);
  const fastifyCode = error.code ? CODE_BY_FASTIFY_ERROR[error.code] : undefined;
  if (fastifyCode) return known({ code: fastifyCode, detail: publicDetail(fastifyCode, error, request) });
  const byStatus = error.statusCode && error.statusCode < 500 ? CODE_BY_STATUS[error.statusCode] : undefined;
  if (byStatus) return known({ code: byStatus, detail: error.message });
  if (error.statusCode === 503)
    return known({ code: 'unavailable', detail: 'The service is temporarily unavailable.' });
  return null;
}

function publicDetail(code: ErrorCode, error: FastifyError, request: FastifyRequest): string {
  switch (code) {
    case 'unsupported_media_type':
      return `This endpoint accepts ${(request.routeOptions.schema?.consumes ?? ['application/json']).join(' or ')} bodies.`;
    case 'payload_too_large':
      return 'The request body is larger than this endpoint accepts.';
    default:
      return error.message;
  }
}
