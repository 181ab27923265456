import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';

export interface HealthRoutesOptions {
  /** Each check throws when its dependency is unusable. */
  readinessChecks: Record<string, () => Promise<void>>;
}

const Health = Type.Object({ status: Type.String(), checks: Type.Optional(Type.Record(Type.String(), Type.String())) });

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { readinessChecks }) => {
  app.get(
    '/healthz',
    { schema: { operationId: 'liveness', tags: ['operations'], summary: 'Liveness', response: { 200: Health } } },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readiness',
        tags: ['operations'],
        summary: 'Readiness: the store and the blob storage answer',
        response: { 200: Health, 503: { ...Health, description: 'A dependency is failing; `checks` says which.' } },
      },
    },
    async (request, reply) => {
      const checks: Record<string, string> = {};
      let ready = true;
      for (const [name, check] of Object.entries(readinessChecks)) {
        try {
          await check();
          checks[name] = 'ok';
        } catch (error) {
          request.log.warn({ err: error, check: name }, 'readiness check failed');
          checks[name] = 'failing';
          ready = false;
        }
      }
      if (!ready) return reply.code(503).type('application/json').send({ status: 'unavailable', checks });
      return { status: 'ok', checks };
    },
  );
};
