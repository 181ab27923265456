import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { metricsAccess } from '../metrics-access.js';

/**
 * Prometheus metrics at GET /metrics: process metrics and one latency histogram per route
 * (labelled by the route pattern, never the raw URL, so ids do not explode the label set).
 * Each app has its own registry, so tests that build many apps do not share counters.
 */
export function registerMetrics(
  app: FastifyInstance,
  registry = newProcessRegistry(),
  access = metricsAccess(undefined),
): Registry {
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
    registers: [registry],
  });
  const problems = new Counter({
    name: 'http_problem_responses_total',
    help: 'Problem (error) responses by status',
    labelNames: ['status'] as const,
    registers: [registry],
  });

  // A callback hook, not async: it never waits, and it runs on every request (see app.ts).
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    if (route !== '/metrics') {
      duration.observe({ method: request.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
      if (reply.statusCode >= 400) problems.inc({ status: String(reply.statusCode) });
    }
    done();
  });

  app.get('/metrics', { schema: { hide: true }, onRequest: access }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return registry;
}

/**
 * How many requests wait for a task to change (each holds a socket and memory until its task moves
 * or its deadline passes), read when /metrics is scraped, so that a request pays nothing for it.
 */
export function registerTaskWaitMetrics(registry: Registry, waitsHeld: () => number): void {
  new Gauge({
    name: 'imagegen_task_waits',
    help: 'Requests waiting for a task to change: long-polls, event streams between events, tool calls',
    registers: [registry],
    collect() {
      this.set(waitsHeld());
    },
  });
}

/** A registry with the process's own metrics (CPU, memory, event loop). */
export function newProcessRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}
