import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../core/errors.js';
import { hashApiKey, isWellFormedApiKey } from '../../services/api-keys.js';
import type { Store } from '../../store/port.js';

export interface Caller {
  accountId: string;
  keyId: string;
  keyName: string;
  keyPrefix: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
  interface FastifyContextConfig {
    /**
     * 'bearer' (the default): a valid key is required. 'bearer-or-signature': a request without an
     * Authorization header passes with `caller` null, and the route itself must check another proof
     * (the signature of a signed media URL). A key that is sent is checked either way.
     */
    auth?: 'bearer' | 'bearer-or-signature';
  }
}

/** Counts failed attempts per client address and shuts the address out once it has too many. */
export interface AuthFailureLimiter {
  /** Throws the 429 problem (with its headers set on reply) while the address is shut out. */
  assertAllowed(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  recordFailure(request: FastifyRequest): Promise<void>;
}

export interface AuthOptions {
  store: Store;
  now: () => Date;
  failureLimiter?: AuthFailureLimiter;
}

/** last_used_at is informational; writing it on every request would cost a write per read. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Bearer authentication for every route of the scope it is registered in, except that a route
 * configured with `auth: 'bearer-or-signature'` also lets keyless requests through (with `caller`
 * null) for the route to check. Missing, malformed, unknown and revoked keys are all the same 401
 * so that the answer reveals nothing.
 */
export function registerBearerAuth(scope: FastifyInstance, options: AuthOptions): void {
  const lastMarked = new Map<string, number>();
  scope.decorateRequest('caller', null as unknown as Caller);
  scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers.authorization === undefined && request.routeOptions.config.auth === 'bearer-or-signature') return;
    const key = bearerTokenOf(request.headers.authorization);
    if (!key) throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>.');
    // A shut-out address is refused before its key is even hashed: guessing costs us nothing more.
    await options.failureLimiter?.assertAllowed(request, reply);
    const found = isWellFormedApiKey(key) ? await options.store.findActiveApiKey(hashApiKey(key)) : null;
    if (!found) {
      await options.failureLimiter?.recordFailure(request);
      throw new DomainError('unauthorized', 'The API key is unknown or revoked.');
    }
    request.caller = { accountId: found.account.id, keyId: found.key.id, keyName: found.key.name, keyPrefix: found.key.prefix };

    const now = options.now();
    if (now.getTime() - (lastMarked.get(found.key.id) ?? 0) >= LAST_USED_RESOLUTION_MS) {
      lastMarked.set(found.key.id, now.getTime());
      await options.store.markApiKeyUsed(found.key.id, now);
    }
  });
}

function bearerTokenOf(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}
