import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import sse from '@fastify/sse';
import type { Config } from '../config.js';
import type { AppServices } from './app-services.js';
import type { RateLimits } from './plugins/rate-limit.js';
import { accountRoutes } from './routes/account.js';
import { generationRoutes } from './routes/generations.js';
import { mediaRoutes } from './routes/media.js';
import { modelRoutes } from './routes/models.js';
import { taskEventRoutes } from './routes/task-events.js';
import { webhookRoutes } from './routes/webhooks.js';
import { selfServiceRoutes } from './routes/self-service.js';

export interface ApiV1Options {
  config: Config;
  services: AppServices;
  /** The per-key limits of the authenticated scope (authenticated-api.ts) this API sits in. */
  rateLimits: RateLimits;
}

/**
 * The native API under /api/v1, inside the authenticated scope (its hooks: no caching, rate
 * limits, Bearer auth, idempotency): the route plugins, each given the services it names.
 */
export const apiV1: FastifyPluginAsyncTypebox<ApiV1Options> = async (api, { config, services, rateLimits }) => {
  const { now, signer, tasks, submission } = services;
  await api.register(generationRoutes, { submission, tasks, signer, now, createsRateLimit: rateLimits.creates });
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
  await api.register(selfServiceRoutes, { admin: services.admin });
};
