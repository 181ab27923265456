import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import { GENERATION_REQUEST_SCHEMAS } from '../../../schemas/catalog.js';
import { SHARED_SCHEMAS } from '../../../schemas/resources.js';
import { WEBHOOK_SCHEMAS } from '../../../schemas/webhooks.js';
import { OPENAI_SCHEMAS } from '../../../schemas/openai.js';
import { parseJsonBody } from '../json-body.js';
import { helmetHeaders } from '../security-headers.js';
import { registerErrorHandling } from './errors.js';

/**
 * What every answer of the app gets, registered on the root so that it reaches every route: the
 * security headers and the request id header, CORS, JSON-only bodies, the shared schemas and
 * problem+json errors, in that order.
 */
export async function registerHttpBasics(
  app: FastifyInstance,
  { onStorageFull }: { onStorageFull: () => void },
): Promise<void> {
  // Security headers on every answer (docs/design.md §3.8): nosniff everywhere, and a CSP that keeps /docs
  // out of frames. Results are fetched cross-origin (CORS is open), so resources are cross-origin too.
  // Helmet's headers depend on these options only: computed once, set with the request id.
  const securityHeaders = helmetHeaders({
    contentSecurityPolicy: { directives: { 'frame-ancestors': ["'none'"], 'upgrade-insecure-requests': null } },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    strictTransportSecurity: false,
  });
  // Hooks on every request that never wait take a callback: an async hook costs a promise and a
  // turn of the microtask queue per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(securityHeaders);
    reply.header('x-request-id', request.id);
    done();
  });
  // Browsers of any origin may call the API: it uses no cookies, so a page can only act with a key
  // it was given. Preflights are answered before authentication (browsers send them without it).
  await app.register(cors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    strictPreflight: false,
    // Joined once: @fastify/cors joins an array again for every answer, and an event stream's
    // response keeps its headers for as long as it is open (5 000 streams, 5 000 copies).
    exposedHeaders: [
      'Location',
      'Idempotent-Replayed',
      'Retry-After',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'ETag',
      'WWW-Authenticate',
      'x-request-id',
      // The OpenAI face's: the tasks an answer made, and whether a retry can help.
      'x-imagegen-task-ids',
      'x-should-retry',
    ].join(', '),
  });

  // Fastify parses text/plain by default; this API speaks JSON (and multipart where declared), so a
  // text body must be refused with 415 rather than reach the schema as a string.
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody);

  for (const schema of [...GENERATION_REQUEST_SCHEMAS, ...SHARED_SCHEMAS, ...WEBHOOK_SCHEMAS, ...OPENAI_SCHEMAS])
    app.addSchema(schema);
  registerErrorHandling(app, { onStorageFull });
}
