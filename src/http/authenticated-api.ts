import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { adminApi } from './admin-api.js';
import { apiV1 } from './api-v1.js';
import type { AppServices } from './app-services.js';
import { registerBearerAuth } from './plugins/auth.js';
import { registerIdempotency } from './plugins/idempotency.js';
import { registerRateLimits } from './plugins/rate-limit.js';
import { mcpRoutes } from './routes/mcp.js';
import { openAiImagesRoutes } from './routes/openai-images.js';

export interface AuthenticatedApiOptions {
  config: Config;
  services: AppServices;
  /** Shared rate-limit counters; null: counted in this process's memory. */
  rateLimitRedis: Redis | null;
}

/**
 * Everything a key opens, in one unprefixed scope so that its faces share the same keys, rate-limit
 * counters and idempotency keys: no caching, rate limits, Bearer auth and idempotency for every
 * route, then the faces, each under its own prefix: the native API (/api/v1), the OpenAI Images
 * face (/v1) and the MCP server (/mcp); and the admin API (/admin/v1), which takes admin keys
 * instead of account keys under the same rate limits and failed-authentication budget.
 */
export const authenticatedApi: FastifyPluginAsyncTypebox<AuthenticatedApiOptions> = async (
  scope,
  { config, services, rateLimitRedis },
) => {
  // Answers carry keys' data, secrets and signed URLs: no cache keeps them unless a route says so.
  scope.addHook('onRequest', (_request, reply, done) => {
    reply.header('cache-control', 'no-store');
    done();
  });
  // The failure limit guards authentication; the per-key limits (route-level onRequest hooks)
  // run after it, since they need the caller; idempotency (a preHandler) runs only for
  // requests that passed both.
  const rateLimits = await registerRateLimits(scope, {
    createsPerMin: config.RATE_LIMIT_CREATES_PER_MIN,
    requestsPerMin: config.RATE_LIMIT_REQUESTS_PER_MIN,
    authFailuresPerMin: config.RATE_LIMIT_AUTH_FAILURES_PER_MIN,
    redis: rateLimitRedis,
    redisKeyPrefix: config.REDIS_KEY_PREFIX,
  });
  registerBearerAuth(scope, {
    keys: services.apiKeys,
    now: services.now,
    failureLimiter: rateLimits.authFailures,
    callerOfAccessToken: config.MCP ? (token) => services.oauth.callerOfAccessToken(token) : undefined,
  });
  registerIdempotency(scope, { service: services.idempotency });

  await scope.register(apiV1, { prefix: '/api/v1', config, services, rateLimits });
  await scope.register(openAiImagesRoutes, {
    prefix: '/v1',
    images: services.openAiImages,
    media: services.media,
    signer: services.signer,
    now: services.now,
    createsRateLimit: rateLimits.creates,
    uploadTempDir: services.uploadTempDir,
    uploadMaxBytes: config.UPLOAD_MAX_BYTES,
    uploadIdleTimeoutMs: config.UPLOAD_IDLE_TIMEOUT_MS,
    onStorageFull: () => services.diskSpace.noteFull(),
  });
  // The admin API (decision 0036): its own keys, this scope's rate limits and failure budget.
  await scope.register(adminApi, { prefix: '/admin/v1', services, failureLimiter: rateLimits.authFailures });
  // MCP=false leaves the MCP server out (decision 0026).
  if (config.MCP)
    await scope.register(mcpRoutes, {
      tools: services.imageTools,
      bodyLimit: mcpBodyLimit(config.UPLOAD_MAX_BYTES),
      spendCreate: rateLimits.spendCreate,
      resourceMetadataUrl: services.oauth.protectedResourceMetadataUrl,
    });
};

/** A JSON-RPC body of /mcp may carry an upload as base64 (4/3 of its size), plus the message around it. */
const mcpBodyLimit = (uploadMaxBytes: number) => Math.ceil(uploadMaxBytes / 3) * 4 + 64 * 1024;
