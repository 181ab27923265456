import { resolve } from 'node:path';
import { pino } from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { modelBackends, publicBaseUrl, type Config } from './config.js';
import { buildApp } from './http/app.js';
import { newProcessRegistry } from './http/plugins/metrics.js';
import { buildWorkerMetricsApp } from './http/worker-metrics-app.js';
import { releaseImageCaches } from './images/normalize-upload.js';
import { closeRateLimitCounters, openRateLimitCounters, openRuntime, type Runtime } from './runtime.js';
import { createAccountWithKey } from './services/api-keys.js';
import { PrometheusWorkerMetrics, registerQueueMetrics } from './services/capacity-metrics.js';
import {
  type DependencyCheck,
  dataDirDiskSpace,
  registerDependencyMetrics,
  storageChecks,
} from './services/readiness.js';
import { buildBackgroundWork, type BackgroundWork } from './worker/build-worker.js';
import { CliError, out } from './cli-output.js';

/**
 * The CLI's long-running commands: `serve` and `api` (the web server, with in-process workers or
 * none) and `worker`, each draining on SIGTERM or SIGINT. Loaded by src/cli.ts for these commands
 * only: the web server, the worker and the image library are what make a process's start slow.
 */

/** `serve` (workers: WORKER_CONCURRENCY) or `api` (workers: 0). */
export async function serve(config: Config, options: { workers: number }): Promise<number> {
  // Process-wide settings, made once before any image is touched (not by each app or worker built).
  releaseImageCaches();
  const shutdown = listenForShutdown(config);
  const draining = new AbortController();
  const runtime = await openRuntime(config, { longRunning: true });
  if (runtime.store.kind === 'sqlite') {
    if ((await runtime.store.accounts.countAccounts()) === 0) await printDevelopmentKey(runtime, config);
    else printAnotherKeyHint(config);
  }
  const { events } = runtime;
  let worker: BackgroundWork | null = null;
  // One /metrics for the API and its in-process workers.
  const metricsRegistry = newProcessRegistry();
  // Its errors go to the app's log once there is one; failing to connect stops the start instead.
  let log: FastifyInstance['log'] | undefined;
  const rateLimitRedis = await openRateLimitCounters(config, (err) => log?.warn({ err }, 'redis (rate limits) error'));
  const app = await buildApp({
    config,
    store: runtime.store,
    blobs: runtime.blobs,
    mediaSigningSecret: runtime.mediaSigningSecret,
    events,
    metricsRegistry,
    rateLimitRedis,
    onWebhookQueued: () => worker?.webhooks.poke(),
    draining: draining.signal,
  });
  log = app.log;
  if (options.workers > 0) {
    worker = buildBackgroundWork(config, runtime, {
      events,
      log: app.log,
      concurrency: options.workers,
      metrics: new PrometheusWorkerMetrics(metricsRegistry, backendsInUse(config)),
    });
  }
  await app.listen({ port: config.PORT, host: config.HOST });
  worker?.start();
  app.log.info({ workers: options.workers, model_backends: modelBackends(config) }, 'ready');
  if (usesGlibcDefaultMmapThreshold()) {
    app.log.warn(
      'MALLOC_MMAP_THRESHOLD_ is not set: with glibc defaults, memory used to decode uploads is not given back after a burst. ' +
        'Start with MALLOC_MMAP_THRESHOLD_=131072 MALLOC_ARENA_MAX=2 (as npm start does; docs/capacity.md, "Memory").',
    );
  }

  const signal = await shutdown.signalled;
  const plan = drainPlan(config, signal);
  app.log.info({ signal, delay_ms: plan.delayMs, grace_ms: config.SHUTDOWN_GRACE_MS }, 'draining');
  // At once: /readyz is 503 and the in-process workers claim nothing new; running tasks go on.
  draining.abort();
  const [, closed] = await Promise.all([
    worker?.stop(plan.taskGraceMs),
    (async () => {
      // Still serving while load balancers take the node out; then stop accepting, answer the
      // long-polls and event streams (preClose), and wait for the requests in flight until the grace is over.
      await sleep(plan.delayMs);
      return closeWithin(app, plan.cutAt);
    })(),
  ]);
  await closeRateLimitCounters(rateLimitRedis);
  await runtime.close();
  app.log.info({ elapsed_ms: Date.now() - plan.startedAt, requests_cut: closed.cut }, 'drained');
  return 0;
}

/** The drain's timeline (docs/design.md §4.4), from the signal on. */
interface DrainPlan {
  startedAt: number;
  /** An API process serves on for this long after /readyz turned 503 (SIGTERM only). */
  delayMs: number;
  /** Running tasks may finish within this; the rest are released. */
  taskGraceMs: number;
  /** When requests still in flight are cut: a reserve before SHUTDOWN_GRACE_MS is over, to close the rest. */
  cutAt: number;
}

function drainPlan(config: Config, signal: string): DrainPlan {
  const startedAt = Date.now();
  const grace = config.SHUTDOWN_GRACE_MS;
  // Releasing tasks, closing the store and flushing logs take a moment: kept out of the tasks' grace.
  const releaseReserve = Math.min(2000, Math.floor(grace / 10));
  return {
    startedAt,
    delayMs: signal === 'SIGTERM' ? Math.min(config.SHUTDOWN_DELAY_MS, Math.floor(grace / 2)) : 0,
    taskGraceMs: grace - releaseReserve,
    cutAt: startedAt + grace - releaseReserve,
  };
}

/**
 * Closes the app: no new connection, waits answered (preClose hooks), then the requests in flight
 * are waited for until `deadline`, when the connections still open are cut. A keep-alive connection
 * is closed as soon as its last answer is sent (the server closes only those idle when it stops).
 */
async function closeWithin(app: FastifyInstance, deadline: number): Promise<{ cut: boolean }> {
  let cut = false;
  const idle = setInterval(() => app.server.closeIdleConnections(), 50);
  const timer = setTimeout(
    () => {
      cut = true;
      app.log.warn('shutdown grace over: cutting the requests still in flight');
      app.server.closeAllConnections();
    },
    Math.max(0, deadline - Date.now()),
  );
  try {
    await app.close();
  } finally {
    clearTimeout(timer);
    clearInterval(idle);
  }
  return { cut };
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

export async function workerCommand(config: Config): Promise<number> {
  if (config.WORKER_CONCURRENCY === 0)
    throw new CliError('WORKER_CONCURRENCY is 0; a worker process needs at least 1.');
  releaseImageCaches();
  const shutdown = listenForShutdown(config);
  const runtime = await openRuntime(config, { longRunning: true });
  const log = pino({ level: config.LOG_LEVEL });
  const metricsRegistry = newProcessRegistry();
  registerQueueMetrics(metricsRegistry, runtime.store.backendLimits, (error) =>
    log.warn({ err: error }, 'queue metrics unavailable'),
  );
  const metrics = new PrometheusWorkerMetrics(metricsRegistry, backendsInUse(config));
  // The worker's own /readyz and imagegen_dependency_up: the dependencies it uses (no Redis).
  const readinessChecks = storageChecks({
    store: runtime.store,
    blobs: runtime.blobs,
    disk: dataDirDiskSpace(config),
  });
  registerDependencyMetrics(metricsRegistry, readinessChecks);
  const worker = buildBackgroundWork(config, runtime, { log, events: runtime.events, metrics });
  const draining = new AbortController();
  const metricsApp = await listenForMetrics(config, metricsRegistry, log, readinessChecks, draining.signal);
  worker.start();
  log.info({ concurrency: config.WORKER_CONCURRENCY, model_backends: modelBackends(config) }, 'worker started');
  const signal = await shutdown.signalled;
  const plan = drainPlan(config, signal);
  log.info({ signal, grace_ms: config.SHUTDOWN_GRACE_MS }, 'worker draining');
  // Claims nothing from now on; running tasks may finish within the grace, the rest are released
  // to the queue (a NOTIFY wakes the other workers at once). /readyz is 503 meanwhile, /metrics served.
  draining.abort();
  await worker.stop(plan.taskGraceMs);
  await metricsApp?.close();
  await runtime.close();
  log.info({ elapsed_ms: Date.now() - plan.startedAt }, 'worker drained');
  return 0;
}

function backendsInUse(config: Config): string[] {
  return [...new Set(Object.values(modelBackends(config)))];
}

/**
 * The worker's /metrics, /healthz and /readyz on WORKER_METRICS_PORT. A port already taken (several workers
 * on one host with the default) is logged and the worker runs without them: its work matters more.
 */
async function listenForMetrics(
  config: Config,
  registry: Registry,
  log: pino.Logger,
  readinessChecks: Record<string, DependencyCheck>,
  draining: AbortSignal,
): Promise<FastifyInstance | null> {
  if (config.WORKER_METRICS_PORT === 0) return null;
  const app = buildWorkerMetricsApp(registry, {
    metricsToken: config.METRICS_TOKEN,
    readinessChecks,
    draining,
    onCheckFailed: (check, err) => log.warn({ err, check }, 'readiness check failed'),
  });
  try {
    await app.listen({ port: config.WORKER_METRICS_PORT, host: config.HOST });
    log.info({ port: config.WORKER_METRICS_PORT, host: config.HOST }, 'worker metrics listening');
    return app;
  } catch (error) {
    log.error({ err: error, port: config.WORKER_METRICS_PORT }, 'worker metrics not served: set WORKER_METRICS_PORT');
    await app.close();
    return null;
  }
}

/** glibc's malloc with its adaptive mmap threshold (docs/capacity.md, "Memory"); other allocators are left alone. */
function usesGlibcDefaultMmapThreshold(): boolean {
  if (process.env.MALLOC_MMAP_THRESHOLD_ !== undefined) return false;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime !== undefined;
}

/**
 * SIGTERM or SIGINT, listened for from the start of a long-running command (a signal during the
 * start is kept, and drains once it is up). A second signal ends the process at once, and so does
 * the drain outlasting its grace by far (a store that never answers): as PID 1 in a container no
 * default handler would.
 */
function listenForShutdown(config: Config): { signalled: Promise<string> } {
  let signalled = false;
  const { promise, resolve } = Promise.withResolvers<string>();
  const onSignal = (signal: string) => {
    if (signalled) {
      process.stderr.write(`${signal} again: exiting without finishing the drain.\n`);
      process.exit(1);
    }
    signalled = true;
    resolve(signal);
    setTimeout(() => {
      process.stderr.write('The drain did not end in time: exiting.\n');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_MS + 10_000).unref();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return { signalled: promise };
}

/** First start of an empty embedded install: a development account, its key printed once. */
async function printDevelopmentKey(runtime: Runtime, config: Config): Promise<void> {
  const { account, key } = await createAccountWithKey(runtime.store, {
    name: 'development',
    tokens: config.DEV_ACCOUNT_TOKENS,
    now: new Date(),
  });
  const base = publicBaseUrl(config);
  out(
    [
      '',
      `Created a development account (${account.id}) with ${account.balance} tokens.`,
      'Its API key is shown only this once:',
      '',
      `  ${key}`,
      '',
      'Try it:',
      `  curl -s -X POST ${base}/api/v1/images/generations \\`,
      `    -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\`,
      `    -d '{"model":"alpha-pro","prompt":"a lighthouse at dawn","parameters":{"aspect_ratio":"16:9"}}'`,
      '',
      `API docs: ${base}/docs`,
      ...(config.PLAYGROUND ? [`Playground (paste the key there): ${base}/playground`] : []),
      '',
    ].join('\n'),
  );
}

/**
 * A restart of an install that has accounts: the development key was printed once, on the first
 * start, so say how to make another one, with the DATA_DIR the CLI must be given to find them.
 */
function printAnotherKeyHint(config: Config): void {
  const dataDir = resolve(config.DATA_DIR);
  out(
    [
      '',
      `Using the existing install in ${dataDir}; its development key was shown on its first start only.`,
      'To make another key, run the CLI on the same DATA_DIR:',
      `  DATA_DIR=${dataDir} npm run cli -- keys create --name NAME --tokens 1000`,
      `API docs: ${publicBaseUrl(config)}/docs`,
      ...(config.PLAYGROUND ? [`Playground: ${publicBaseUrl(config)}/playground`] : []),
      '',
    ].join('\n'),
  );
}
