import { Type } from '@sinclair/typebox';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
} from 'fastify';
import {
  IDEMPOTENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_PATTERN,
  assertValidIdempotencyKey,
  jsonRequestFingerprint,
  type HeldIdempotencyKey,
  type IdempotencyService,
  type StoredResponse,
} from '../../services/idempotency.js';
import { withRouteHook } from '../route-hooks.js';

/**
 * Idempotency-Key (docs/design.md §3.8) over HTTP: the header, and the replay of a stored answer.
 *
 * The creates (native, OpenAI, MCP) hand the key to their use case, GenerationSubmission, which
 * claims, renews, completes and releases it: `idempotencyOf(request, fingerprint)` reads it and
 * `sendStoredResponse` answers a replay. Routes that only change one record (a cancel, an upload)
 * opt in with
 *
 *   config: { idempotent: true }      the key binds to method, path and the parsed JSON body
 *   config: { idempotent: 'manual' }  the handler computes its own fingerprint (a multipart upload
 *                                     hashes the bytes it streamed) and calls
 *                                     `if (!(await request.idempotency?.claim(reply, fp) ?? true)) return reply;`
 *
 * and their successful responses (< 400) are kept and replayed; 4xx and 5xx release the key,
 * because they leave nothing behind that a retry could duplicate. Every such route declares
 * `headers: IdempotencyKeyHeaders` in its schema, so that the header is validated and documented.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    idempotent?: boolean | 'manual';
  }
  interface FastifyRequest {
    /** Set when the route is idempotent and the request carries an Idempotency-Key. */
    idempotency: IdempotentRequest | null;
  }
}

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'idempotent-replayed';
/** The headers that are part of the answer; the rest (request id, rate limits) belong to each delivery. */
const KEPT_HEADERS = ['location', 'content-type'] as const;

export const IdempotencyKeyHeaders = Type.Object({
  [IDEMPOTENCY_KEY_HEADER]: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
      pattern: IDEMPOTENCY_KEY_PATTERN,
      description:
        'A unique value (printable ASCII, e.g. a UUID) that makes retries safe: for 24 hours a request with the same key ' +
        'and the same body returns the first response, with `Idempotent-Replayed: true`, instead of running again. ' +
        'The same key with a different body is refused (422); while the first request runs, 409.',
    }),
  ),
});

/** The request's Idempotency-Key (checked as the schema checks it) with the fingerprint it binds to; null without one. */
export function idempotencyOf(
  request: FastifyRequest,
  fingerprint: () => string,
): { key: string; fingerprint: string } | null {
  const header = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (header === undefined) return null;
  const key = Array.isArray(header) ? header.join(', ') : header;
  assertValidIdempotencyKey(key);
  return { key, fingerprint: fingerprint() };
}

/** Answers with the response kept under a key, marked as a replay. */
export function sendStoredResponse(reply: FastifyReply, response: StoredResponse): FastifyReply {
  reply.code(response.statusCode);
  for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
  reply.header(REPLAYED_HEADER, 'true');
  return reply.send(response.body);
}

export class IdempotentRequest {
  /** Non-null from a successful claim until the response settles it. */
  private heldKey: HeldIdempotencyKey | null = null;
  private lease: { stop(): void } | null = null;

  constructor(
    readonly key: string,
    private readonly request: FastifyRequest,
    private readonly service: IdempotencyService,
  ) {}

  /**
   * Claims the key for this request. Returns true when the handler should do its work, false when
   * the first response has been replayed on `reply` (the handler returns `reply`). Throws the 409
   * and 422 problems.
   */
  async claim(reply: FastifyReply, fingerprint: string): Promise<boolean> {
    if (this.heldKey) throw new Error('Idempotency key claimed twice in one request.');
    const result = await this.service.claim(this.request.caller.accountId, this.key, fingerprint);
    if (result.outcome === 'replay') {
      sendStoredResponse(reply, result.response);
      return false;
    }
    this.heldKey = result.held;
    this.lease = this.service.keepAlive(result.held, (err) =>
      this.request.log.warn({ err }, 'could not renew an idempotency lease'),
    );
    return true;
  }

  /** The key, once the response no longer needs it: its lease is no longer renewed. */
  settle(): HeldIdempotencyKey | null {
    const held = this.heldKey;
    this.heldKey = null;
    this.lease?.stop();
    this.lease = null;
    return held;
  }
}

export interface IdempotencyPluginOptions {
  service: IdempotencyService;
}

/**
 * Registers the hooks in an authenticated scope (they need `request.caller`). They are attached to
 * the routes that opt in, not to the scope: every other request (reads above all) would otherwise
 * pay two async hooks that have nothing to do (docs/performance-history.md, "Optimisations").
 */
export function registerIdempotency(scope: FastifyInstance, { service }: IdempotencyPluginOptions): void {
  scope.decorateRequest('idempotency', null);

  // preHandler: after authentication, rate limiting and validation, so that a refused request
  // never takes a key and the fingerprint is computed from a body known to be well-formed.
  const claimKey: preHandlerAsyncHookHandler = async (request, reply) => {
    const asked = idempotencyOf(request, () =>
      jsonRequestFingerprint(request.method, request.url.split('?')[0], request.body),
    );
    if (!asked) return;
    const idempotency = new IdempotentRequest(asked.key, request, service);
    request.idempotency = idempotency;
    if (request.routeOptions.config.idempotent === true) {
      if (!(await idempotency.claim(reply, asked.fingerprint))) return reply;
    }
  };

  // onSend runs for every response, errors included, and before any byte leaves: the key is
  // settled before the client can retry.
  const settleKey: onSendAsyncHookHandler = async (request, reply, payload) => {
    const held = request.idempotency?.settle();
    if (!held) return payload;
    const body = storableBody(payload);
    try {
      if (reply.statusCode < 400 && body) {
        const kept = await service.complete(held, { statusCode: reply.statusCode, headers: keptHeaders(reply), body });
        if (!kept)
          request.log.warn({ idempotencyKey: held.key }, 'idempotency lease was lost before the response was stored');
      } else {
        if (reply.statusCode < 400)
          request.log.warn('a streamed success cannot be kept for replay; its idempotency key is released');
        await service.release(held);
      }
    } catch (err) {
      // The response itself is right; only its replay is lost. The lease frees the key later.
      request.log.error({ err }, 'could not settle the idempotency key');
    }
    return payload;
  };

  scope.addHook('onRoute', (route) => {
    if (!route.config?.idempotent) return;
    route.preHandler = withRouteHook(route.preHandler, claimKey);
    route.onSend = withRouteHook(route.onSend, settleKey);
  });
}

function keptHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = reply.getHeader(name);
    if (value !== undefined) headers[name] = String(value);
  }
  return headers;
}

/** Serialized bodies are strings or buffers; a stream cannot be kept, so its key is released. */
function storableBody(payload: unknown): Buffer | null {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (Buffer.isBuffer(payload)) return payload;
  return null;
}
