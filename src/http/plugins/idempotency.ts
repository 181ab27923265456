import { Type } from '@sinclair/typebox';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
} from 'fastify';
import { DomainError } from '../../core/errors.js';
import {
  IDEMPOTENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_PATTERN,
  IDEMPOTENCY_LEASE_RENEW_MS,
  assertValidIdempotencyKey,
  jsonRequestFingerprint,
  type HeldIdempotencyKey,
  type IdempotencyService,
} from '../../services/idempotency.js';
import type { StoredResponse } from '../../services/idempotency.js';
import { withRouteHook } from '../route-hooks.js';

/**
 * Idempotency-Key (docs/design.md §3.8) as a per-route opt-in:
 *
 *   config: { idempotent: true }      the key binds to method, path and the parsed JSON body
 *   config: { idempotent: 'manual' }  the handler computes its own fingerprint (a multipart upload
 *                                     hashes the bytes it streamed) and calls
 *                                     `if (!(await request.idempotency?.claim(reply, fp) ?? true)) return reply;`
 *
 * plus `headers: IdempotencyKeyHeaders` in the route schema so that the header is validated and
 * documented. Successful responses (< 400) are kept and replayed; 4xx and 5xx release the key,
 * because they leave nothing behind that a retry could duplicate.
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
const IN_PROGRESS_RETRY_AFTER_SECONDS = 1;
/**
 * A guard, not a limit a request should meet: renewal ends with the response, and a request is cut
 * off by HTTP_REQUEST_TIMEOUT_MS long before this. Should a response never settle its key, the key
 * is not held for ever.
 */
const MAX_RENEWED_HOLD_MS = 15 * 60 * 1000;

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

export class IdempotentRequest {
  /** Non-null from a successful claim until the response settles it. */
  private heldKey: HeldIdempotencyKey | null = null;
  private renewal: NodeJS.Timeout | null = null;

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
    if (this.held) throw new Error('Idempotency key claimed twice in one request.');
    let result: Awaited<ReturnType<IdempotencyService['claim']>>;
    try {
      result = await this.service.claim(this.request.caller.accountId, this.key, fingerprint);
    } catch (error) {
      // The first request finishes in milliseconds; a prompt retry will most likely be its replay.
      if (error instanceof DomainError && error.code === 'idempotency_in_progress')
        reply.header('retry-after', IN_PROGRESS_RETRY_AFTER_SECONDS);
      throw error;
    }
    if (result.outcome === 'replay') {
      sendReplay(reply, result.response);
      return false;
    }
    this.held = result.held;
    return true;
  }

  get held(): HeldIdempotencyKey | null {
    return this.heldKey;
  }

  /**
   * Holding a key renews its short lease until the key is settled; setting null (the response
   * settled it) stops the renewal. A process that dies stops renewing, so its keys are free again
   * within IDEMPOTENCY_LEASE_MS.
   */
  set held(held: HeldIdempotencyKey | null) {
    this.heldKey = held;
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = null;
    if (!held) return;
    const until = Date.now() + MAX_RENEWED_HOLD_MS;
    this.renewal = setInterval(() => {
      if (Date.now() > until) return this.stopRenewing();
      this.service.renew(held).then(
        (kept) => {
          if (!kept && this.heldKey === held) this.stopRenewing();
        },
        (err: unknown) => this.request.log.warn({ err }, 'could not renew an idempotency lease'),
      );
    }, IDEMPOTENCY_LEASE_RENEW_MS);
    this.renewal.unref();
  }

  private stopRenewing(): void {
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = null;
  }

  /** The handler's own transaction completed the key (with the resource it created); onSend leaves it. */
  settle(): void {
    this.held = null;
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
    const header = request.headers[IDEMPOTENCY_KEY_HEADER];
    if (header === undefined) return;
    const key = Array.isArray(header) ? header.join(', ') : header;
    assertValidIdempotencyKey(key);
    const idempotency = new IdempotentRequest(key, request, service);
    request.idempotency = idempotency;
    if (request.routeOptions.config.idempotent === true) {
      const fingerprint = jsonRequestFingerprint(request.method, request.url.split('?')[0], request.body);
      if (!(await idempotency.claim(reply, fingerprint))) return reply;
    }
  };

  // onSend runs for every response, errors included, and before any byte leaves: the key is
  // settled before the client can retry.
  const settleKey: onSendAsyncHookHandler = async (request, reply, payload) => {
    const held = request.idempotency?.held;
    if (!held) return payload;
    request.idempotency!.held = null;
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

function sendReplay(reply: FastifyReply, response: StoredResponse): FastifyReply {
  reply.code(response.statusCode);
  for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
  reply.header(REPLAYED_HEADER, 'true');
  return reply.send(response.body);
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
