import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { BlobStore } from '../blobs/port.js';
import type { Config } from '../config.js';
import { registerQueueMetrics } from '../services/capacity-metrics.js';
import { registerDependencyMetrics } from '../services/readiness.js';
import type { TaskEvents } from '../services/task-events.js';
import { sweepSpoolFiles } from '../services/upload-spool.js';
import type { Store } from '../store/port.js';
import type { LookupAll } from '../webhooks/ssrf-guard.js';
import { authenticatedApi } from './authenticated-api.js';
import { buildAppServices } from './app-services.js';
import { metricsAccess } from './metrics-access.js';
import { registerHttpBasics } from './plugins/http-basics.js';
import { registerMetrics, registerTaskWaitMetrics } from './plugins/metrics.js';
import { registerOpenApi } from './plugins/openapi.js';
import { healthRoutes } from './routes/health.js';
import { oauthRoutes } from './routes/oauth.js';
import { builtPageRoutes, consoleContentSecurityPolicy, playgroundContentSecurityPolicy } from './routes/pages.js';
import { rootRoutes } from './routes/root.js';
import { serverOptions } from './server-options.js';

export interface AppDependencies {
  config: Config;
  store: Store;
  /** HMAC secret for signed media URLs. */
  mediaSigningSecret: string;
  /** Media bytes: the adapter the process opened (runtime.ts); the app never opens one itself. */
  blobs: BlobStore;
  /** DNS for the webhook URL check; tests map names to addresses without a resolver. */
  webhookLookup?: LookupAll;
  /** Shared with in-process workers so that long-polls and cancels are heard at once. */
  events?: TaskEvents;
  /** Called when a webhook delivery is queued by a request (replay), to wake an in-process dispatcher. */
  onWebhookQueued?: () => void;
  now?: () => Date;
  logger?: boolean | object;
  /** Prometheus registry of /metrics; `serve` shares it with its in-process workers. Default: the app's own. */
  metricsRegistry?: Registry;
  /**
   * Shared rate-limit counters, opened and closed by the process (openRateLimitCounters); null:
   * counted in this process's memory.
   */
  rateLimitRedis: Redis | null;
  /** The built Playground (index.html, playground.js, playground.css); default: dist/playground. */
  playgroundDir?: string;
  /** The built console (index.html, console.js, console.css); default: dist/console. */
  consoleDir?: string;
  /**
   * Aborted when the process begins to shut down (SIGTERM): /readyz answers 503 from then on, while
   * the app still serves until it is closed (docs/design.md §4, drain).
   */
  draining?: AbortSignal;
}

/**
 * Builds the whole HTTP app; never listens (the CLI does, tests use inject). The services are built
 * once (app-services.ts); then, in order: what every answer gets, metrics, the OpenAPI document,
 * the Playground and the console, health, and the authenticated scope (authenticated-api.ts: the native API under
 * /api/v1, the OpenAI Images face under /v1).
 */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps;
  const now = deps.now ?? (() => new Date());
  const app = Fastify(serverOptions(config, deps.logger)).withTypeProvider<TypeBoxTypeProvider>();
  const services = buildAppServices(deps, { now, log: app.log });

  await registerHttpBasics(app, { onStorageFull: () => services.diskSpace.noteFull() });
  const metricsRegistry = registerMetrics(app, deps.metricsRegistry, metricsAccess(config.METRICS_TOKEN));
  registerQueueMetrics(metricsRegistry, deps.store.backendLimits, (error) =>
    app.log.warn({ err: error }, 'queue metrics unavailable'),
  );
  await registerOpenApi(app, { exposeUi: true });
  if (config.PLAYGROUND)
    await app.register(builtPageRoutes, {
      page: 'playground',
      policy: playgroundContentSecurityPolicy(config),
      dir: deps.playgroundDir,
    });
  if (config.CONSOLE)
    await app.register(builtPageRoutes, {
      page: 'console',
      policy: consoleContentSecurityPolicy(),
      dir: deps.consoleDir,
    });
  await app.register(rootRoutes, { playground: config.PLAYGROUND, mcp: config.MCP });

  // Spool files of uploads that a killed process left behind go at start, not only at the next
  // housekeeping pass (an API-only process runs none).
  app.addHook('onReady', async () => {
    const removed = await sweepSpoolFiles(services.uploadTempDir, now());
    if (removed) app.log.info({ removed }, 'upload spool files of dead processes removed');
  });
  await app.register(healthRoutes, {
    readinessChecks: services.readinessChecks,
    backendCircuits: services.backendCircuits,
    draining: deps.draining,
  });
  // Closing: open event streams end with `reconnect`, held waits (long-polls, tool calls, the
  // OpenAI face) are answered with their tasks as they are, before the server waits for its requests.
  app.addHook('preClose', async () => {
    services.streams.stopAll();
    services.tasks.drain();
  });
  registerDependencyMetrics(metricsRegistry, services.readinessChecks);
  registerTaskWaitMetrics(metricsRegistry, () => services.tasks.waitsHeld);
  // OAuth for /mcp (decision 0034): discovery, registration, consent, tokens; outside the key's scope.
  if (config.MCP)
    await app.register(oauthRoutes, {
      oauth: services.oauth,
      perAddressPerMin: config.RATE_LIMIT_OAUTH_PER_MIN,
      rateLimitRedis: deps.rateLimitRedis,
      redisKeyPrefix: config.REDIS_KEY_PREFIX,
    });
  await app.register(authenticatedApi, {
    config,
    services,
    rateLimitRedis: deps.rateLimitRedis,
  });
  return app;
}
