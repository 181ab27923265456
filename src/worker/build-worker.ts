import path from 'node:path';
import { publicBaseUrl, type Config } from '../config.js';
import { configuredBackends } from '../generators/model-backends.js';
import type { ImageGenerator } from '../generators/port.js';
import type { Runtime } from '../runtime.js';
import { HmacMediaUrlSigner } from '../services/media-url-signer.js';
import type { TaskEvents } from '../services/task-events.js';
import type { LookupAll } from '../webhooks/ssrf-guard.js';
import { Housekeeper } from './housekeeper.js';
import type { WorkerMetrics } from '../services/capacity-metrics.js';
import type { WorkerBackend } from './backend-lane.js';
import { TaskWorker } from './task-worker.js';
import type { WorkerLog } from './worker-log.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';

/** A webhook delivery claimed by a dispatcher is retried after this long if it never reported back. */
const WEBHOOK_CLAIM_LEASE_MS = 60_000;

export interface BackgroundWorkOptions {
  events?: TaskEvents;
  log?: WorkerLog;
  /** One generator for every model instead of the configured backends (tests). */
  generator?: ImageGenerator;
  /** Local renderer slots; default WORKER_CONCURRENCY. */
  concurrency?: number;
  webhookLookup?: LookupAll;
  metrics?: WorkerMetrics;
}

/** The adaptive limit starts here (docs/design.md §4.2), below any ceiling one would set by hand. */
const INITIAL_REMOTE_CONCURRENCY = 4;

/**
 * The backends a worker runs, with their slots: the local renderer is CPU-bound, one task per
 * slot of WORKER_CONCURRENCY (the cores by default); a remote backend is I/O-bound, its calls
 * limited by an adaptive limit shared by the cluster, under <BACKEND>_MAX_CONCURRENCY.
 */
export function workerBackends(config: Config, localSlots = config.WORKER_CONCURRENCY): WorkerBackend[] {
  return configuredBackends(config).map(({ backend, models, generator }): WorkerBackend => {
    if (backend === 'local') return { name: backend, models, generator, slots: localSlots };
    const max = backend === 'gemini' ? config.GEMINI_MAX_CONCURRENCY : config.OPENAI_MAX_CONCURRENCY;
    return {
      name: backend,
      models,
      generator,
      slots: max,
      sharedLimit: {
        initial: Math.min(INITIAL_REMOTE_CONCURRENCY, max),
        max,
        unavailableCooldownMs: config.BACKEND_UNAVAILABLE_COOLDOWN_MS,
      },
    };
  });
}

/** Everything a worker runs besides HTTP: tasks, webhook deliveries and retention. */
export interface BackgroundWork {
  tasks: TaskWorker;
  webhooks: WebhookDispatcher;
  housekeeper: Housekeeper;
  start(): void;
  /** Stops claiming, gives running tasks graceMs to finish, releases the rest. */
  stop(graceMs: number): Promise<void>;
}

/** The same setup for `serve` (in-process) and `worker` (a process of its own). */
export function buildBackgroundWork(
  config: Config,
  runtime: Pick<Runtime, 'store' | 'blobs' | 'mediaSigningSecret'>,
  options: BackgroundWorkOptions = {},
): BackgroundWork {
  const tasks = new TaskWorker({
    store: runtime.store,
    blobs: runtime.blobs,
    backends: options.generator
      ? [
          {
            name: options.generator.name,
            generator: options.generator,
            slots: options.concurrency ?? config.WORKER_CONCURRENCY,
          },
        ]
      : workerBackends(config, options.concurrency),
    events: options.events,
    log: options.log,
    metrics: options.metrics,
    // The signing secret keys the accounts' safety identifiers too (an HMAC with its own label).
    safetyIdentifierKey: runtime.mediaSigningSecret,
    leaseMs: config.TASK_LEASE_MS,
    maxAttempts: config.TASK_MAX_ATTEMPTS,
    deadlineMs: config.TASK_DEADLINE_MS,
    generationTimeoutMs: config.GENERATION_TIMEOUT_MS,
    retryBaseMs: config.GENERATION_RETRY_BASE_MS,
    pollMs: config.WORKER_POLL_MS,
    resultRetentionMs: config.RESULT_RETENTION_HOURS * 3600_000,
  });
  const webhooks = new WebhookDispatcher({
    store: runtime.store,
    signer: new HmacMediaUrlSigner(runtime.mediaSigningSecret, publicBaseUrl(config), config.SIGNED_URL_TTL_SECONDS),
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    lookup: options.webhookLookup,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    retryScale: config.WEBHOOK_RETRY_SCALE,
    leaseMs: WEBHOOK_CLAIM_LEASE_MS,
    pollMs: config.WORKER_POLL_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    log: options.log,
  });
  const housekeeper = new Housekeeper({
    store: runtime.store,
    blobs: runtime.blobs,
    intervalMs: config.HOUSEKEEPING_INTERVAL_MS,
    uploadTempDir: path.join(config.DATA_DIR, 'tmp'),
    log: options.log,
  });
  let unsubscribe: (() => void) | undefined;

  return {
    tasks,
    webhooks,
    housekeeper,
    start() {
      tasks.start();
      webhooks.start();
      housekeeper.start();
      unsubscribe = options.events?.onAnyChange(() => webhooks.poke());
    },
    async stop(graceMs) {
      unsubscribe?.();
      await tasks.stop(graceMs);
      await Promise.all([webhooks.stop(), housekeeper.stop()]);
    },
  };
}
