import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import {
  backendCircuit,
  backendCircuitStates,
  backendSizePlans,
  upscaleCheck,
} from '../generators/backend-admission.js';
import { publicBaseUrl } from '../config.js';
import { ImageTools } from '../mcp/tools.js';
import { AccountService } from '../services/account-service.js';
import { ApiKeyAuthentication } from '../services/api-keys.js';
import { AdminKeyAuthentication } from '../services/admin-keys.js';
import { AdminService } from '../services/admin-service.js';
import { ConnectionSlots } from '../services/connection-slots.js';
import { GenerationSubmission } from '../services/generation-submission.js';
import { IdempotencyService } from '../services/idempotency.js';
import { MediaService } from '../services/media-service.js';
import { OpenAiImagesService } from '../services/openai-images.js';
import { HmacMediaUrlSigner } from '../services/media-url-signer.js';
import { type DependencyCheck, dataDirDiskSpace, storageChecks } from '../services/readiness.js';
import { ReferenceImport } from '../services/reference-import.js';
import { TaskEvents } from '../services/task-events.js';
import { TaskService } from '../services/task-service.js';
import { TaskStreams } from '../services/task-streams.js';
import { WebhookService } from '../services/webhook-service.js';
import { parsePortRanges } from '../webhooks/ssrf-guard.js';
import type { AppDependencies } from './app.js';
import { OAuthService } from '../services/oauth.js';
import { clientDocumentReader } from '../services/client-metadata-document.js';

/** Everything the app's plugins are given: the services over the process's adapters, built once. */
export type AppServices = ReturnType<typeof buildAppServices>;

/**
 * The services of one app, from the adapters the process opened: plain objects with no connection
 * of their own. Each route plugin is handed the ones its options name.
 */
export function buildAppServices(deps: AppDependencies, context: { now: () => Date; log: FastifyBaseLogger }) {
  const { config, store, blobs } = deps;
  const { now } = context;
  const signer = new HmacMediaUrlSigner(deps.mediaSigningSecret, publicBaseUrl(config), config.SIGNED_URL_TTL_SECONDS);
  const resolutionCheck = upscaleCheck(backendSizePlans(config), config.MAX_UPSCALE);
  // Where a URL a user gives may point: webhook targets, and reference images fetched for MCP.
  const userUrlPolicy = {
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    lookup: deps.webhookLookup,
    allowedPorts: parsePortRanges(config.WEBHOOK_ALLOWED_PORTS),
  };
  const events = deps.events ?? new TaskEvents();
  const tasks = new TaskService({ store, events, now, crossProcessPollMs: config.LONG_POLL_FALLBACK_MS });
  const media = new MediaService({
    store: store.media,
    blobs,
    now,
    uploadRetentionMs: config.UPLOAD_RETENTION_HOURS * 3600_000,
    maxPixels: config.UPLOAD_MAX_PIXELS,
    normalizeConcurrency: config.UPLOAD_DECODE_CONCURRENCY,
    presignedDownloadTtlSeconds: config.S3_PRESIGNED_DOWNLOADS ? config.S3_PRESIGNED_URL_TTL_SECONDS : undefined,
    log: context.log,
  });
  // A write that found the disk full makes /readyz fail for a while (DiskSpace).
  const diskSpace = dataDirDiskSpace(config, now);
  const sharedCounters = deps.rateLimitRedis;
  const readinessChecks: Record<string, DependencyCheck> = {
    ...storageChecks({ store, blobs, disk: diskSpace }),
    // Redis away: the limits fail open (decision 0003), so the node is degraded but still ready.
    rate_limits: async () => (sharedCounters === null || sharedCounters.status === 'ready' ? 'ok' : 'degraded'),
  };
  const circuits = backendCircuitStates(config, store.backendLimits);
  const idempotency = new IdempotencyService({ store: store.idempotencyKeys, now });
  // The one create of every face: the native route, the OpenAI face and the MCP tool.
  const submission = new GenerationSubmission({
    store,
    idempotency,
    deleteUpload: (accountId, mediaId) => media.delete(accountId, mediaId),
    events,
    now,
    maxActiveTasks: config.MAX_ACTIVE_TASKS,
    webhookPolicy: userUrlPolicy,
    resolutionCheck,
    backendUnavailableFor: backendCircuit(config, store.backendLimits),
    log: context.log,
  });
  const uploadTempDir = join(config.DATA_DIR, 'tmp');
  const accounts = new AccountService({
    store,
    limits: {
      createsPerMin: config.RATE_LIMIT_CREATES_PER_MIN,
      requestsPerMin: config.RATE_LIMIT_REQUESTS_PER_MIN,
      maxActiveTasks: config.MAX_ACTIVE_TASKS,
    },
  });
  // The Bearer authentication's key lookups (the auth plugin).
  const apiKeys = new ApiKeyAuthentication(store);
  return {
    now,
    apiKeys,
    // OAuth for /mcp (decision 0034): the service is its own authorization server.
    oauth: new OAuthService({
      store,
      issuer: publicBaseUrl(config),
      now,
      clientDocuments: clientDocumentReader(userUrlPolicy),
    }),
    // The admin API's keys and use cases (decision 0036).
    adminKeys: new AdminKeyAuthentication(store, config.ADMIN_API_KEY),
    admin: new AdminService(store, now, (match) => apiKeys.forget(match)),
    signer,
    resolutionCheck,
    tasks,
    submission,
    media,
    diskSpace,
    readinessChecks,
    backendCircuits: () => circuits(now()),
    uploadTempDir,
    idempotency,
    openAiImages: new OpenAiImagesService({
      submission,
      tasks,
      media,
      waitMs: config.OPENAI_COMPAT_WAIT_SECONDS * 1000,
    }),
    // The MCP server's tools (decision 0026): the same services as the REST routes.
    imageTools: new ImageTools({
      submission,
      tasks,
      media,
      references: new ReferenceImport({
        media,
        tempDir: uploadTempDir,
        maxBytes: config.UPLOAD_MAX_BYTES,
        urlPolicy: userUrlPolicy,
      }),
      accounts,
      signer,
      resolutionCheck,
      now,
    }),
    streams: new TaskStreams({
      tasks,
      streamSlots: new ConnectionSlots({
        perProcess: Number.POSITIVE_INFINITY,
        perKey: config.SSE_MAX_STREAMS_PER_KEY,
      }),
      taskDeadlineMs: config.TASK_DEADLINE_MS,
    }),
    accounts,
    webhooks: new WebhookService({
      store,
      now,
      onDeliveryQueued: deps.onWebhookQueued,
      replayBudget: {
        perDelivery: config.WEBHOOK_MANUAL_RETRIES_PER_HOUR,
        perAccount: config.WEBHOOK_MANUAL_RETRIES_PER_ACCOUNT_PER_HOUR,
        windowMs: 3600_000,
      },
    }),
    uploadSlots: new ConnectionSlots({
      perProcess: config.UPLOAD_MAX_IN_FLIGHT,
      perKey: config.UPLOAD_MAX_IN_FLIGHT_PER_KEY,
    }),
  };
}
