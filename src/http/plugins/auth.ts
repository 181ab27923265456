import type { FastifyInstance, FastifyRequest } from 'fastify';
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
}

export interface AuthOptions {
  store: Store;
  now: () => Date;
}

/** last_used_at is informational; writing it on every request would cost a write per read. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Bearer authentication for every route of the scope it is registered in. Missing, malformed,
 * unknown and revoked keys are all the same 401 so that the answer reveals nothing.
 */
export function registerBearerAuth(scope: FastifyInstance, options: AuthOptions): void {
  const lastMarked = new Map<string, number>();
  scope.decorateRequest('caller', null as unknown as Caller);
  scope.addHook('onRequest', async (request: FastifyRequest) => {
    const key = bearerTokenOf(request.headers.authorization);
    if (!key) throw new DomainError('unauthorized', 'Send Authorization: Bearer <API key>.');
    const found = isWellFormedApiKey(key) ? await options.store.findActiveApiKey(hashApiKey(key)) : null;
    if (!found) throw new DomainError('unauthorized', 'The API key is unknown or revoked.');
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
