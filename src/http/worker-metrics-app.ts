import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { metricsAccess } from './metrics-access.js';

/**
 * What a `worker` process serves over HTTP (docs/design.md §4.2): /metrics for Prometheus (its
 * tasks in progress, upstream calls, generation durations, and the queue and limits it reads from
 * the store) and /healthz for the orchestrator. It has no API; /metrics takes METRICS_TOKEN, or
 * answers loopback clients only, like the API's. Never listens itself: the CLI does.
 */
export function buildWorkerMetricsApp(registry: Registry, metricsToken?: string): FastifyInstance {
  const app = Fastify({ logger: false });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    reply.header('x-content-type-options', 'nosniff');
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/metrics', { onRequest: metricsAccess(metricsToken) }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return app;
}
