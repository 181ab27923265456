import { randomUUID } from 'node:crypto';
import {
  backendCircuit,
  backendCircuitStates,
  backendSizePlans,
  upscaleCheck,
} from '../generators/backend-admission.js';
import { join } from 'node:path';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Redis } from 'ioredis';
import type { Registry } from 'prom-client';
import type { BlobStore } from '../blobs/port.js';
import cors from '@fastify/cors';
import { GENERATION_REQUEST_SCHEMAS } from '../../schemas/catalog.js';
import { SHARED_SCHEMAS } from '../../schemas/resources.js';
import { WEBHOOK_SCHEMAS } from '../../schemas/webhooks.js';
import type { Config } from '../config.js';
import { publicBaseUrl, trustProxyOption } from '../config.js';
import { IdempotencyService } from '../services/idempotency.js';
import { MediaService } from '../services/media-service.js';
import { HmacMediaUrlSigner } from '../services/media-url-signer.js';
import { TaskEvents } from '../services/task-events.js';
import { ConnectionSlots } from '../services/connection-slots.js';
import { sweepSpoolFiles } from '../services/upload-spool.js';
import { parsePortRanges, type LookupAll } from '../webhooks/ssrf-guard.js';
import { TaskService } from '../services/task-service.js';
import type { Store } from '../store/port.js';
import { registerBearerAuth } from './plugins/auth.js';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './plugins/errors.js';
import { registerIdempotency } from './plugins/idempotency.js';
import { registerMetrics } from './plugins/metrics.js';
import { metricsAccess } from './metrics-access.js';
import { registerQueueMetrics } from '../services/capacity-metrics.js';
import { registerOpenApi } from './plugins/openapi.js';
import { registerRateLimits } from './plugins/rate-limit.js';
import {
  type DependencyCheck,
  dataDirDiskSpace,
  registerDependencyMetrics,
  storageChecks,
} from '../services/readiness.js';
import { accountRoutes } from './routes/account.js';
import { generationRoutes } from './routes/generations.js';
import { taskEventRoutes } from './routes/task-events.js';
import sse from '@fastify/sse';
import { healthRoutes } from './routes/health.js';
import { mediaRoutes } from './routes/media.js';
import { modelRoutes } from './routes/models.js';
import { playgroundRoutes } from './routes/playground.js';
import { webhookRoutes } from './routes/webhooks.js';
import { parseJsonBody } from './json-body.js';
import { helmetHeaders } from './security-headers.js';
import { buildSerializerCompilerFactory } from './serialization.js';
import { buildValidatorCompilerFactory } from './validation.js';

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
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
const JSON_BODY_LIMIT = 1024 * 1024;

/**
 * One info line per request, when it ends. Fastify's default writes two, serialising the request
 * and the reply, which was the largest cost of a request at LOG_LEVEL=info (docs/performance-history.md,
 * "Optimisations"); and it logs the full URL, where a signed media URL carries its signature.
 */
class OneLinePerRequest extends LogController {
  incomingRequest(): void {}

  requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      super.requestCompleted(error, request, reply);
      return;
    }
    request.log.info(
      {
        method: request.method,
        path: request.url.split('?', 1)[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      'request completed',
    );
  }
}

/** Builds the whole HTTP app; never listens (the CLI does, tests use inject). */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const now = deps.now ?? (() => new Date());
  const app = Fastify({
    logger: deps.logger ?? { level: deps.config.LOG_LEVEL, redact: ['req.headers.authorization'] },
    bodyLimit: JSON_BODY_LIMIT,
    // No request may hold a connection for ever (fastify's defaults wait without limit): headers
    // and the whole request must arrive in time, and a silent connection is closed.
    requestTimeout: deps.config.HTTP_REQUEST_TIMEOUT_MS,
    connectionTimeout: deps.config.HTTP_IDLE_TIMEOUT_MS,
    http: {
      headersTimeout: deps.config.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeout: deps.config.HTTP_REQUEST_TIMEOUT_MS,
      // Node checks the two timeouts above on this interval (default 30 s), so it bounds how late they fire.
      connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(deps.config.HTTP_HEADERS_TIMEOUT_MS / 4))),
    },
    trustProxy: deps.config.TRUST_PROXY === undefined ? false : trustProxyOption(deps.config.TRUST_PROXY),
    routerOptions: { ignoreTrailingSlash: true },
    // A caller's own request id is kept so that both sides can find the same request in their logs.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_PATTERN.test(given) ? given : randomUUID();
    },
    schemaController: {
      compilersFactory: {
        buildValidator: buildValidatorCompilerFactory(),
        buildSerializer: buildSerializerCompilerFactory(),
      },
    },
    logController: new OneLinePerRequest(),
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Security headers on every answer (docs/design.md §3.8): nosniff everywhere, and a CSP that keeps /docs
  // out of frames. Results are fetched cross-origin (CORS is open), so resources are cross-origin too.
  // Helmet's headers depend on these options only: computed once, set with the request id.
  const securityHeaders = helmetHeaders({
    contentSecurityPolicy: { directives: { 'frame-ancestors': ["'none'"], 'upgrade-insecure-requests': null } },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    strictTransportSecurity: false,
  });
  // Hooks on every request that never wait take a callback: an async hook costs a promise and a
  // turn of the microtask queue per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(securityHeaders);
    reply.header('x-request-id', request.id);
    done();
  });
  // Browsers of any origin may call the API: it uses no cookies, so a page can only act with a key
  // it was given. Preflights are answered before authentication (browsers send them without it).
  await app.register(cors, {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    strictPreflight: false,
    exposedHeaders: [
      'Location',
      'Idempotent-Replayed',
      'Retry-After',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'ETag',
      'WWW-Authenticate',
      'x-request-id',
    ],
  });

  // Fastify parses text/plain by default; this API speaks JSON (and multipart where declared), so a
  // text body must be refused with 415 rather than reach the schema as a string.
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody);

  for (const schema of [...GENERATION_REQUEST_SCHEMAS, ...SHARED_SCHEMAS, ...WEBHOOK_SCHEMAS]) app.addSchema(schema);
  // A write that found the disk full makes /readyz fail for a while (DiskSpace).
  const diskSpace = dataDirDiskSpace(deps.config, now);
  registerErrorHandling(app, { onStorageFull: () => diskSpace.noteFull() });
  const metricsRegistry = registerMetrics(app, deps.metricsRegistry, metricsAccess(deps.config.METRICS_TOKEN));
  registerQueueMetrics(metricsRegistry, deps.store.backendLimits, (error) =>
    app.log.warn({ err: error }, 'queue metrics unavailable'),
  );
  await registerOpenApi(app, { exposeUi: true });
  if (deps.config.PLAYGROUND) await app.register(playgroundRoutes, { config: deps.config, dir: deps.playgroundDir });

  const signer = new HmacMediaUrlSigner(
    deps.mediaSigningSecret,
    publicBaseUrl(deps.config),
    deps.config.SIGNED_URL_TTL_SECONDS,
  );
  const resolutionCheck = upscaleCheck(backendSizePlans(deps.config), deps.config.MAX_UPSCALE);
  const tasks = new TaskService({
    store: deps.store,
    events: deps.events ?? new TaskEvents(),
    now,
    maxActiveTasks: deps.config.MAX_ACTIVE_TASKS,
    crossProcessPollMs: deps.config.LONG_POLL_FALLBACK_MS,
    webhookPolicy: {
      allowPrivate: deps.config.WEBHOOK_ALLOW_PRIVATE,
      lookup: deps.webhookLookup,
      allowedPorts: parsePortRanges(deps.config.WEBHOOK_ALLOWED_PORTS),
    },
    resolutionCheck,
    backendUnavailableFor: backendCircuit(deps.config, deps.store.backendLimits),
  });

  const blobs = deps.blobs;
  const media = new MediaService({
    store: deps.store.media,
    blobs,
    now,
    uploadRetentionMs: deps.config.UPLOAD_RETENTION_HOURS * 3600_000,
    maxPixels: deps.config.UPLOAD_MAX_PIXELS,
    normalizeConcurrency: deps.config.UPLOAD_DECODE_CONCURRENCY,
    presignedDownloadTtlSeconds: deps.config.S3_PRESIGNED_DOWNLOADS
      ? deps.config.S3_PRESIGNED_URL_TTL_SECONDS
      : undefined,
    log: app.log,
  });

  const uploadTempDir = join(deps.config.DATA_DIR, 'tmp');
  // Spool files of uploads that a killed process left behind go at start, not only at the next
  // housekeeping pass (an API-only process runs none).
  app.addHook('onReady', async () => {
    const removed = await sweepSpoolFiles(uploadTempDir, now());
    if (removed) app.log.info({ removed }, 'upload spool files of dead processes removed');
  });

  const config = deps.config;
  const sharedCounters = deps.rateLimitRedis;
  const readinessChecks: Record<string, DependencyCheck> = {
    ...storageChecks({ store: deps.store, blobs, disk: diskSpace }),
    // Redis away: the limits fail open (decision 0003), so the node is degraded but still ready.
    rate_limits: async () => (sharedCounters === null || sharedCounters.status === 'ready' ? 'ok' : 'degraded'),
  };
  const circuits = backendCircuitStates(deps.config, deps.store.backendLimits);
  await app.register(healthRoutes, { readinessChecks, backendCircuits: () => circuits(now()) });
  registerDependencyMetrics(metricsRegistry, readinessChecks);
  const idempotency = new IdempotencyService({ store: deps.store.idempotencyKeys, now });

  await app.register(
    async (api) => {
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
        redis: deps.rateLimitRedis,
        redisKeyPrefix: config.REDIS_KEY_PREFIX,
      });
      registerBearerAuth(api, { store: deps.store, now, failureLimiter: rateLimits.authFailures });
      registerIdempotency(api, { service: idempotency });
      await api.register(generationRoutes, { tasks, signer, now, createsRateLimit: rateLimits.creates });
      // The package's module.exports is the plugin wrapped by fastify-plugin (its hooks reach the
      // routes of this scope); its typings call the module object a namespace with a `default`.
      await api.register(sse as unknown as typeof sse.fastifySSE, { heartbeatInterval: config.SSE_HEARTBEAT_MS });
      await api.register(taskEventRoutes, {
        tasks,
        signer,
        now,
        streamSlots: new ConnectionSlots({
          perProcess: Number.POSITIVE_INFINITY,
          perKey: config.SSE_MAX_STREAMS_PER_KEY,
        }),
        taskDeadlineMs: config.TASK_DEADLINE_MS,
      });
      await api.register(accountRoutes, {
        store: deps.store,
        limits: {
          createsPerMin: config.RATE_LIMIT_CREATES_PER_MIN,
          requestsPerMin: config.RATE_LIMIT_REQUESTS_PER_MIN,
          maxActiveTasks: config.MAX_ACTIVE_TASKS,
        },
      });
      await api.register(modelRoutes, { resolutionCheck });
      await api.register(mediaRoutes, {
        media,
        signer,
        now,
        uploadTempDir,
        uploadMaxBytes: config.UPLOAD_MAX_BYTES,
        uploadIdleTimeoutMs: config.UPLOAD_IDLE_TIMEOUT_MS,
        uploadSlots: new ConnectionSlots({
          perProcess: config.UPLOAD_MAX_IN_FLIGHT,
          perKey: config.UPLOAD_MAX_IN_FLIGHT_PER_KEY,
        }),
        signedUrlTtlSeconds: config.SIGNED_URL_TTL_SECONDS,
      });
      await api.register(webhookRoutes, {
        store: deps.store,
        now,
        onDeliveryQueued: deps.onWebhookQueued,
        replayBudget: {
          perDelivery: config.WEBHOOK_MANUAL_RETRIES_PER_HOUR,
          perAccount: config.WEBHOOK_MANUAL_RETRIES_PER_ACCOUNT_PER_HOUR,
          windowMs: 3600_000,
        },
      });
    },
    { prefix: '/api/v1' },
  );

  return app;
}
