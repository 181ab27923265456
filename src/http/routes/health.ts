import rateLimit from '@fastify/rate-limit';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { StringEnum } from '../../../schemas/model-entry.js';
import { Timestamp } from '../../../schemas/primitives.js';
import type { CircuitState } from '../../generators/backend-admission.js';
import { checkReadiness, type DependencyCheck, readinessReport } from '../../services/readiness.js';
import { NO_SECURITY, RATE_LIMIT_HEADERS, plainResponse, problemResponses } from '../route-schemas.js';

export interface HealthRoutesOptions {
  readinessChecks: Record<string, DependencyCheck>;
  /** Each remote model backend's circuit breaker, for /readyz's detail (it does not decide readiness). */
  backendCircuits?: () => Promise<Record<string, { circuit: CircuitState; until?: string }>>;
  /** Aborted when the process begins to shut down: /readyz answers 503 at once from then on. */
  draining?: AbortSignal;
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
    backends: Type.Optional(
      Type.Record(
        Type.String({ maxLength: 32, pattern: '^[a-z_]+$' }),
        Type.Object(
          {
            circuit: StringEnum(['closed', 'open', 'half_open'], {
              description:
                '`closed`: calls go; `open`: the backend was found unavailable (a bad key, billing, an exhausted quota): no call, and a create for a model it serves is 503 until `until`; `half_open`: the cool-down is over, the next task is the one call that decides.',
            }),
            until: Type.Optional({ ...Timestamp, description: 'While open: when the first probe call may go.' }),
          },
          { additionalProperties: false },
        ),
        {
          description:
            '/readyz only: each remote model backend configured (`gemini`, `openai`) and its circuit breaker, shared by the cluster. An open circuit does not make the node unready: it still serves the other models and every read.',
          maxProperties: 8,
        },
      ),
    ),
  },
  { additionalProperties: false },
);

const healthProblems = problemResponses(['rate_limited', 'internal_error']);

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (
  app,
  { readinessChecks, backendCircuits, draining },
) => {
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
          '200 when the store and the blob storage answer and the disk has room, 503 naming the failing dependency otherwise (a load balancer sends the node no traffic meanwhile), and 503 from the moment the process is told to shut down (it drains). Redis down is `rate_limits: degraded`, still 200. Needs no key.',
        security: NO_SECURITY,
        response: {
          200: plainResponse(Health, 'Ready: every dependency answers.', RATE_LIMIT_HEADERS),
          503: plainResponse(
            Health,
            'A dependency is failing (`checks` says which), or the process is shutting down (no `checks`).',
            {},
          ),
          ...healthProblems,
        },
      },
    },
    async (request, reply) => {
      // Shutting down: the node takes no new work, whatever its dependencies say.
      if (draining?.aborted)
        return reply
          .code(503)
          .type('application/json')
          .send({ status: 'unavailable' as const });
      const [readiness, backends] = await Promise.all([
        checkReadiness(readinessChecks),
        // Detail only: a store that cannot say is already the `store` check's failure.
        backendCircuits?.().catch((err: unknown) => {
          request.log.warn({ err }, 'backend circuits unreadable');
          return undefined;
        }),
      ]);
      for (const [check, err] of Object.entries(readiness.causes))
        request.log.warn({ err, check }, 'readiness check failed');
      const detail = backends && Object.keys(backends).length > 0 ? { backends } : {};
      const report = { ...readinessReport(readiness), ...detail };
      if (!readiness.ready) return reply.code(503).type('application/json').send(report);
      return { ...report, status: 'ok' as const };
    },
  );
};
