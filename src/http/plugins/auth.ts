import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../core/errors.js';
import { accountSuspended, isExpired } from '../../core/key-scope.js';
import { type ApiKeyAuthentication, type Caller, hashApiKey, isWellFormedApiKey } from '../../services/api-keys.js';

export type { Caller };

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
  interface FastifyContextConfig {
    /**
     * 'bearer' (the default): a valid key is required. 'bearer-or-signature': a request without an
     * Authorization header passes with `caller` null, and the route itself must check another proof
     * (the signature of a signed media URL). A key that is sent is checked either way.
     * 'bearer-or-access-token' (/mcp): an OAuth access token issued for the route's resource is
     * taken as well as a key (decision 0034).
     */
    auth?: 'bearer' | 'bearer-or-signature' | 'bearer-or-access-token' | 'admin';
  }
}

/** Counts failed attempts per client address and refuses its further failures once it has too many. */
export interface AuthFailureLimiter {
  /**
   * Throws the 429 problem (with its headers set on reply) while the address is shut out; counters
   * in process memory answer at once, shared ones through the promise returned.
   */
  assertAllowed(request: FastifyRequest, reply: FastifyReply): void | Promise<void>;
  recordFailure(request: FastifyRequest): Promise<void>;
}

export interface AuthOptions {
  keys: ApiKeyAuthentication;
  now: () => Date;
  failureLimiter?: AuthFailureLimiter;
  /** The caller of an OAuth access token (routes with `auth: 'bearer-or-access-token'`), or null. */
  callerOfAccessToken?: (token: string) => Promise<Caller | null>;
}

/**
 * Bearer authentication for every route of the scope it is registered in, except that a route
 * configured with `auth: 'bearer-or-signature'` also lets keyless requests through (with `caller`
 * null) for the route to check. Missing, malformed, unknown and revoked keys are all the same 401
 * so that the answer reveals nothing.
 */
export function registerBearerAuth(scope: FastifyInstance, options: AuthOptions): void {
  const { keys } = options;
  scope.decorateRequest('caller', null as unknown as Caller);
  /**
   * Authenticates the request; returns a promise only when it must wait (a key not cached, a
   * failure to count, last_used_at to write), so that the common request (a cached key) costs no
   * promise and no turn of the microtask queue.
   */
  const authenticate = (request: FastifyRequest, reply: FastifyReply): Promise<void> | undefined => {
    // The admin API authenticates its own keys (admin-api.ts), under the same failure budget.
    if (request.routeOptions.config.auth === 'admin') return;
    if (request.headers.authorization === undefined && request.routeOptions.config.auth === 'bearer-or-signature')
      return;
    // Node keeps only the first of two Authorization headers. Which credential the client meant is
    // unknowable, and a proxy that adds one may disagree with us about which counts: refused.
    if (authorizationHeaderCount(request.raw.rawHeaders) > 1) {
      const detail = 'Send one Authorization header; this request has several.';
      throw new DomainError('invalid_request', detail, [
        { pointer: '/authorization', location: 'header', code: 'duplicate_header', detail },
      ]);
    }
    const key = bearerTokenOf(request.headers.authorization);
    if (!key) throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>.');
    const now = options.now();
    if (!isWellFormedApiKey(key)) {
      if (options.callerOfAccessToken && request.routeOptions.config.auth === 'bearer-or-access-token')
        return options
          .callerOfAccessToken(key)
          .then((caller) =>
            caller
              ? admit(request, reply, caller, now)
              : refuse(request, reply, 'The access token is unknown, expired or revoked; sign in again.'),
          );
      return refuse(request, reply);
    }
    const hash = hashApiKey(key);
    const cached = keys.cachedCaller(hash, now.getTime());
    if (cached) return admit(request, reply, cached, now);
    return keys
      .loadCaller(hash, now.getTime())
      .then((caller) => (caller ? admit(request, reply, caller, now) : refuse(request, reply)));
  };

  const admit = (
    request: FastifyRequest,
    reply: FastifyReply,
    caller: Caller,
    now: Date,
  ): Promise<void> | undefined => {
    // An expired key is refused like an unknown one (a failed authentication); a suspended
    // account's keys are known, and told why (docs/design.md §3.9).
    if (isExpired(caller.scope, now)) return refuse(request, reply, 'The API key has expired.');
    if (caller.accountStatus === 'suspended') throw accountSuspended();
    request.caller = caller;
    return keys.markUsed(caller.keyId, now);
  };

  // Only failures are throttled: a valid key is served whatever others sent from the same
  // address (a shared NAT, a proxy without TRUST_PROXY). A shut-out address gets 429.
  const refuse = async (
    request: FastifyRequest,
    reply: FastifyReply,
    detail = 'The API key is unknown or revoked.',
  ): Promise<void> => {
    await options.failureLimiter?.assertAllowed(request, reply);
    await options.failureLimiter?.recordFailure(request);
    throw new DomainError('unauthorized', detail);
  };

  scope.addHook('onRequest', (request, reply, done) => {
    let pending: Promise<void> | undefined;
    try {
      pending = authenticate(request, reply);
    } catch (error) {
      // A refusal answers a turn later, as from an async hook: a request whose bytes are broken
      // further on (a bad chunk in the same packet) gets the parser's 400 and a closed connection.
      pending = Promise.reject(error);
    }
    if (pending) pending.then(() => done(), done);
    else done();
  });
}

function authorizationHeaderCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2)
    if (rawHeaders[i].length === 13 && rawHeaders[i].toLowerCase() === 'authorization') count++;
  return count;
}

function bearerTokenOf(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}
