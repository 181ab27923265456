import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import sse from '@fastify/sse';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import type { Store } from '../store/port.js';
import type { AppServices } from './app-services.js';
import { registerBearerAuth } from './plugins/auth.js';
import { registerIdempotency } from './plugins/idempotency.js';
import { registerRateLimits } from './plugins/rate-limit.js';
import { accountRoutes } from './routes/account.js';
import { generationRoutes } from './routes/generations.js';
import { mediaRoutes } from './routes/media.js';
import { modelRoutes } from './routes/models.js';
import { taskEventRoutes } from './routes/task-events.js';
import { webhookRoutes } from './routes/webhooks.js';

export interface ApiV1Options {
  config: Config;
  services: AppServices;
  /** The key lookup of the auth plugin. */
  store: Pick<Store, 'accounts'>;
  /** Shared rate-limit counters; null: counted in this process's memory. */
  rateLimitRedis: Redis | null;
}

/**
 * The authenticated API under /api/v1: no caching, rate limits, Bearer auth and idempotency for
 * every route of the scope, then the route plugins, each given the services it names.
 */
export const apiV1: FastifyPluginAsyncTypebox<ApiV1Options> = async (
  api,
  { config, services, store, rateLimitRedis },
) => {
  const { now, signer, tasks } = services;
  // Answers carry keys' data, secrets and signed URLs: no cache keeps them unless a route says so.
  api.addHook('onRequest', (_request, reply, done) => {
    reply.header('cache-control', 'no-store');
    done();
  });
  // The failure limit guards authentication; the per-key limits (route-level onRequest hooks)
  // run after it, since they need the caller; idempotency (a preHandler) runs only for
  // requests that passed both.
  const rateLimits = await registerRateLimits(api, {
    createsPerMin: config.RATE_LIMIT_CREATES_PER_MIN,
    requestsPerMin: config.RATE_LIMIT_REQUESTS_PER_MIN,
    authFailuresPerMin: config.RATE_LIMIT_AUTH_FAILURES_PER_MIN,
    redis: rateLimitRedis,
    redisKeyPrefix: config.REDIS_KEY_PREFIX,
  });
  registerBearerAuth(api, { store, now, failureLimiter: rateLimits.authFailures });
  registerIdempotency(api, { service: services.idempotency });

  await api.register(generationRoutes, { tasks, signer, now, createsRateLimit: rateLimits.creates });
  // The package's module.exports is the plugin wrapped by fastify-plugin (its hooks reach the
  // routes of this scope); its typings call the module object a namespace with a `default`.
  await api.register(sse as unknown as typeof sse.fastifySSE, { heartbeatInterval: config.SSE_HEARTBEAT_MS });
  await api.register(taskEventRoutes, { streams: services.streams, signer, now });
  await api.register(accountRoutes, { accounts: services.accounts });
  await api.register(modelRoutes, { resolutionCheck: services.resolutionCheck });
  await api.register(mediaRoutes, {
    media: services.media,
    signer,
    now,
    uploadTempDir: services.uploadTempDir,
    uploadMaxBytes: config.UPLOAD_MAX_BYTES,
    uploadIdleTimeoutMs: config.UPLOAD_IDLE_TIMEOUT_MS,
    uploadSlots: services.uploadSlots,
    signedUrlTtlSeconds: config.SIGNED_URL_TTL_SECONDS,
  });
  await api.register(webhookRoutes, { webhooks: services.webhooks });
};
