import rateLimit from '@fastify/rate-limit';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { StringEnum } from '../../../schemas/model-entry.js';
import { checkReadiness, type DependencyCheck, readinessReport } from '../../services/readiness.js';
import { NO_SECURITY, RATE_LIMIT_HEADERS, plainResponse, problemResponses } from '../route-schemas.js';

export interface HealthRoutesOptions {
  readinessChecks: Record<string, DependencyCheck>;
}

/**
 * Health checks need no key, so they are limited per client address instead: far above what a
 * load balancer or orchestrator probes, low enough that /readyz (which reaches the store and the
 * blob storage) cannot be used to load them.
 */
export const HEALTH_CHECKS_PER_MIN_PER_ADDRESS = 600;

const Health = Type.Object(
  {
    status: StringEnum(['ok', 'unavailable']),
    checks: Type.Optional(
      Type.Record(Type.String({ maxLength: 32, pattern: '^[a-z_]+$' }), StringEnum(['ok', 'degraded', 'failing']), {
        description:
          'Each dependency (`store`, `blobs`, `disk`, `rate_limits`) and its state; `degraded` is served without (Redis: rate limits fail open) and does not make the node unready.',
        maxProperties: 16,
      }),
    ),
  },
  { additionalProperties: false },
);

const healthProblems = problemResponses(['rate_limited', 'internal_error']);

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { readinessChecks }) => {
  // In this plugin's own scope: the per-address limit applies to these two routes only.
  await app.register(rateLimit, { max: HEALTH_CHECKS_PER_MIN_PER_ADDRESS, timeWindow: 60_000, enableDraftSpec: true });

  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'liveness',
        tags: ['operations'],
        summary: 'Liveness',
        description: 'Answers 200 while the process runs; checks no dependency (use /readyz for that). Needs no key.',
        security: NO_SECURITY,
        response: { 200: plainResponse(Health, 'The process is alive.', RATE_LIMIT_HEADERS), ...healthProblems },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readiness',
        tags: ['operations'],
        summary: 'Readiness: the node can accept work',
        description:
          '200 when the store and the blob storage answer and the disk has room, 503 naming the failing dependency otherwise (a load balancer sends the node no traffic meanwhile). Redis down is `rate_limits: degraded`, still 200. Needs no key.',
        security: NO_SECURITY,
        response: {
          200: plainResponse(Health, 'Ready: every dependency answers.', RATE_LIMIT_HEADERS),
          503: plainResponse(Health, 'A dependency is failing; `checks` says which.', {}),
          ...healthProblems,
        },
      },
    },
    async (request, reply) => {
      const readiness = await checkReadiness(readinessChecks);
      for (const [check, err] of Object.entries(readiness.causes))
        request.log.warn({ err, check }, 'readiness check failed');
      const report = readinessReport(readiness);
      if (!readiness.ready) return reply.code(503).type('application/json').send(report);
      return { ...report, status: 'ok' as const };
    },
  );
};
