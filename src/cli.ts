#!/usr/bin/env node
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { MODEL_CATALOG } from '../schemas/catalog.js';
import { configurationHelp, priceTable } from './cli-tables.js';
import { ConfigError, ConfigSchema, loadConfig, modelBackends, publicBaseUrl, type Config } from './config.js';
import { buildApp } from './http/app.js';
import { releaseImageCaches } from './images/normalize-upload.js';
import { closeRateLimitCounters, openRateLimitCounters, openRuntime, type Runtime } from './runtime.js';
import { issueAdminKey } from './services/admin-keys.js';
import { createAccountWithKey, issueApiKey } from './services/api-keys.js';
import { DomainError } from './core/errors.js';
import { pino } from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { newProcessRegistry } from './http/plugins/metrics.js';
import { buildWorkerMetricsApp } from './http/worker-metrics-app.js';
import { PrometheusWorkerMetrics, registerQueueMetrics } from './services/capacity-metrics.js';
import {
  type DependencyCheck,
  dataDirDiskSpace,
  registerDependencyMetrics,
  storageChecks,
} from './services/readiness.js';
import { buildBackgroundWork, type BackgroundWork } from './worker/build-worker.js';

const USAGE = `Usage: imagegen <command> [options]

Commands:
  serve                                   API and in-process workers (the embedded default)
  api                                     API only
  worker                                  task worker only (/metrics on WORKER_METRICS_PORT)
  migrate                                 bring the database schema up to date
  keys create --name N --tokens T         new account with T tokens and its first key
  keys create --account ID [--name N]     another key for an existing account
  keys list [--account ID]                keys (prefix, name, created, last used; never the key)
  keys revoke ID_OR_PREFIX                revoke a key with immediate effect
  tokens grant --account ID --tokens T [--note TEXT]
  admin-keys create --name N              a key for /admin/v1 (never an account's); printed once
  admin-keys list                         admin keys (prefix, name, created, last used; never the key)
  admin-keys revoke ID_OR_PREFIX          revoke an admin key
  models                                  the price table: each model's tokens per resolution, ratios, references
  config                                  every configuration variable with its default and description

Configuration comes from environment variables (and an optional .env file); see docs/configuration.md.`;

/** stdout carries results (a new key alone on the last line); stderr carries diagnostics. */
const out = (line: string) => process.stdout.write(`${line}\n`);

/** The optional `.env` of the working directory; a variable already in the environment wins over it. */
function loadDotEnv(): void {
  try {
    process.loadEnvFile();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/**
 * The commands that print what the schemas say: they need neither a valid environment nor the
 * store, so an operator can read them before configuring anything.
 */
const REFERENCE_COMMANDS: Record<string, () => string> = {
  config: () => configurationHelp(ConfigSchema),
  models: () => priceTable(MODEL_CATALOG),
};

/** The commands that serve or work for as long as the process lives. */
const LONG_RUNNING_COMMANDS = new Set(['serve', 'api', 'worker']);

async function main(argv: string[]): Promise<number> {
  loadDotEnv();
  const [command, subcommand, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    out(USAGE);
    return command ? 0 : 1;
  }
  const reference = REFERENCE_COMMANDS[command];
  if (reference) {
    out(reference());
    return 0;
  }
  const config = loadConfig(process.env);
  // Process-wide settings, made once before any image is touched (not by each app or worker built).
  if (LONG_RUNNING_COMMANDS.has(command)) releaseImageCaches();

  switch (command) {
    case 'serve':
      return serve(config, { workers: config.WORKER_CONCURRENCY });
    case 'api':
      return serve(config, { workers: 0 });
    case 'worker':
      return workerCommand(config);
    case 'migrate':
      return withRuntime(config, async () => {
        out('Database schema is up to date.');
      });
    case 'keys':
      return keysCommand(config, subcommand, rest);
    case 'tokens':
      return tokensCommand(config, subcommand, rest);
    case 'admin-keys':
      return adminKeysCommand(config, subcommand, rest);
    default:
      process.stderr.write(`Unknown command "${command}".\n\n${USAGE}\n`);
      return 1;
  }
}

async function withRuntime(config: Config, fn: (runtime: Runtime) => Promise<void>): Promise<number> {
  const runtime = await openRuntime(config);
  try {
    await fn(runtime);
    return 0;
  } finally {
    await runtime.close();
  }
}

async function keysCommand(config: Config, subcommand: string | undefined, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { name: { type: 'string' }, tokens: { type: 'string' }, account: { type: 'string' } },
  });
  return withRuntime(config, async ({ store }) => {
    const now = new Date();
    switch (subcommand) {
      case 'create': {
        if (values.account) {
          const account = await store.accounts.getAccount(values.account);
          if (!account) throw new CliError(`No account ${values.account}.`);
          const { key, record } = await issueApiKey(store, account.id, values.name ?? 'key', now);
          out(`Key ${record.id} (${record.prefix}…) for account ${account.id}. Shown once; store it now:`);
          out(key);
          return;
        }
        if (!values.name) throw new CliError('keys create needs --name N --tokens T, or --account ID.');
        const tokens = parseTokens(values.tokens ?? '0');
        const { account, key } = await createAccountWithKey(store, { name: values.name, tokens, now });
        out(`Account ${account.id} "${account.name}" with ${account.balance} tokens. Key shown once; store it now:`);
        out(key);
        return;
      }
      case 'list': {
        const keys = await store.accounts.listApiKeys(values.account);
        out(['KEY_ID', 'ACCOUNT', 'PREFIX', 'NAME', 'CREATED', 'LAST_USED', 'REVOKED'].join('\t'));
        for (const k of keys) {
          out([k.id, k.accountId, k.prefix, k.name, ...keyDates(k)].join('\t'));
        }
        return;
      }
      case 'revoke': {
        const target = positionals[0];
        if (!target) throw new CliError('keys revoke needs a key id or prefix.');
        if (!(await store.accounts.revokeApiKey(target, now))) throw new CliError(`No active key ${target}.`);
        out(`Revoked ${target}.`);
        return;
      }
      default:
        throw new CliError('keys needs one of: create, list, revoke.');
    }
  });
}

async function adminKeysCommand(config: Config, subcommand: string | undefined, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { name: { type: 'string' } } });
  return withRuntime(config, async ({ store }) => {
    const now = new Date();
    switch (subcommand) {
      case 'create': {
        if (!values.name) throw new CliError('admin-keys create needs --name N.');
        const { key, record } = await issueAdminKey(store, values.name, now);
        out(`Admin key ${record.id} (${record.prefix}…) "${record.name}". Shown once; store it now:`);
        out(key);
        return;
      }
      case 'list': {
        out(['KEY_ID', 'PREFIX', 'NAME', 'CREATED', 'LAST_USED', 'REVOKED'].join('\t'));
        for (const k of await store.admin.listAdminKeys()) out([k.id, k.prefix, k.name, ...keyDates(k)].join('\t'));
        return;
      }
      case 'revoke': {
        const target = positionals[0];
        if (!target) throw new CliError('admin-keys revoke needs a key id or prefix.');
        if (!(await store.admin.revokeAdminKey(target, now))) throw new CliError(`No active admin key ${target}.`);
        out(`Revoked ${target}.`);
        return;
      }
      default:
        throw new CliError('admin-keys needs one of: create, list, revoke.');
    }
  });
}

async function tokensCommand(config: Config, subcommand: string | undefined, args: string[]): Promise<number> {
  if (subcommand !== 'grant') throw new CliError('tokens needs: grant --account ID --tokens T.');
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, tokens: { type: 'string' }, note: { type: 'string' } },
  });
  if (!values.account || !values.tokens) throw new CliError('tokens grant needs --account ID --tokens T.');
  const amount = parseTokens(values.tokens);
  if (amount === 0) throw new CliError('--tokens must be at least 1.');
  return withRuntime(config, async ({ store }) => {
    const account = await store.accounts.grantTokens({
      accountId: values.account!,
      amount,
      note: values.note ?? null,
      now: new Date(),
    });
    out(`Granted ${amount} tokens to ${account.id}; balance ${account.balance}.`);
  });
}

function parseTokens(text: string): number {
  if (!/^\d{1,12}$/.test(text)) throw new CliError(`--tokens must be a whole number, got "${text}".`);
  return Number(text);
}

async function serve(config: Config, options: { workers: number }): Promise<number> {
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

async function workerCommand(config: Config): Promise<number> {
  if (config.WORKER_CONCURRENCY === 0)
    throw new CliError('WORKER_CONCURRENCY is 0; a worker process needs at least 1.');
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

class CliError extends Error {}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const known = error instanceof CliError || error instanceof ConfigError || error instanceof DomainError;
    process.stderr.write(known ? `${(error as Error).message}\n` : `${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);

/** When a key (an account's or an admin's) was made, last used and revoked, as the key tables print them. */
function keyDates(key: { createdAt: Date; lastUsedAt: Date | null; revokedAt: Date | null }): string[] {
  return [key.createdAt.toISOString(), key.lastUsedAt?.toISOString() ?? '-', key.revokedAt?.toISOString() ?? '-'];
}
