import path from 'node:path';
import { publicBaseUrl, type Config } from '../config.js';
import { generatorFromConfig } from '../generators/model-backends.js';
import type { ImageGenerator } from '../generators/port.js';
import type { Runtime } from '../runtime.js';
import { HmacMediaUrlSigner } from '../services/media-url-signer.js';
import type { TaskEvents } from '../services/task-events.js';
import type { LookupAll } from '../webhooks/ssrf-guard.js';
import { Housekeeper } from './housekeeper.js';
import { TaskWorker, type WorkerLog } from './task-worker.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';

/** A webhook delivery claimed by a dispatcher is retried after this long if it never reported back. */
const WEBHOOK_CLAIM_LEASE_MS = 60_000;

export interface BackgroundWorkOptions {
  events?: TaskEvents;
  log?: WorkerLog;
  generator?: ImageGenerator;
  concurrency?: number;
  webhookLookup?: LookupAll;
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
    generator: options.generator ?? generatorFromConfig(config),
    events: options.events,
    log: options.log,
    concurrency: options.concurrency ?? config.WORKER_CONCURRENCY,
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
