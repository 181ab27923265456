import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { checkReadiness, type DependencyCheck, readinessReport } from '../services/readiness.js';
import { metricsAccess } from './metrics-access.js';

export interface WorkerMetricsAppOptions {
  metricsToken?: string;
  /** What /readyz checks: the dependencies the worker uses (store, blob store, disk). */
  readinessChecks?: Record<string, DependencyCheck>;
  /** Where a failing check's cause is logged (never answered). */
  onCheckFailed?: (check: string, err: unknown) => void;
  /** Aborted when the worker begins to shut down: /readyz answers 503 at once from then on. */
  draining?: AbortSignal;
}

/**
 * What a `worker` process serves over HTTP (docs/design.md §4.2): /metrics for Prometheus (its
 * tasks in progress, upstream calls, generation durations, the queue and limits it reads from the
 * store, and whether its dependencies answer), /healthz for the orchestrator's liveness probe and
 * /readyz with the same report as the API's (200, or 503 naming the failing dependency). It has no
 * API; /metrics takes METRICS_TOKEN, or answers loopback clients only, like the API's. Never
 * listens itself: the CLI does.
 */
export function buildWorkerMetricsApp(registry: Registry, options: WorkerMetricsAppOptions = {}): FastifyInstance {
  const { metricsToken, readinessChecks = {}, onCheckFailed, draining } = options;
  const app = Fastify({ logger: false });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    reply.header('x-content-type-options', 'nosniff');
  });
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (draining?.aborted) return reply.code(503).send({ status: 'unavailable' });
    const readiness = await checkReadiness(readinessChecks);
    for (const [check, err] of Object.entries(readiness.causes)) onCheckFailed?.(check, err);
    return reply.code(readiness.ready ? 200 : 503).send(readinessReport(readiness));
  });
  app.get('/metrics', { onRequest: metricsAccess(metricsToken) }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return app;
}
