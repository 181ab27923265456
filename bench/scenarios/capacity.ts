/**
 * docs/design.md §5, capacity at a provider's limit (decision 0016): a loopback provider of fixed capacity
 * (C = 8 calls at once, L = 500 ms each, Gemini's documented 429 RESOURCE_EXHAUSTED with a
 * RetryInfo of 1 s for any call beyond C; test/helpers/capacity-provider.ts) serves `alpha-pro`
 * (ALPHA_PRO_BACKEND=gemini). 400 tasks: one account creates 340 at once, then, once those creates
 * are answered, three other accounts 20 each; every task is long-polled until it ends
 * (test/helpers/capacity-scenario.ts, the same driver as the capacity tests).
 *
 * Two setups, each with the service's defaults for everything that decides capacity: `serve` on the
 * embedded default, and an API-only `serve` with 2 `worker` processes on PostgreSQL. Figures:
 * makespan (first create sent → last task's `completed_at`) against the provider's own limit
 * N·L/C = 25 s, the share of the provider's calls it refused, the moment the small accounts' last
 * task completed as a share of the run, and the tasks that did not complete.
 */
import { join } from 'node:path';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { CapacityProvider } from '../../test/helpers/capacity-provider.js';
import {
  providerLimitMs,
  runCapacityScenario,
  scenarioFigures,
  serviceOverhead,
  type CapacityScenario,
  type ScenarioAccount,
} from '../../test/helpers/capacity-scenario.js';
import { DATABASE_URL, urlFor, withSchema } from '../lib/postgres.js';
import { serviceEnv, startService, startWorkerProcess } from '../lib/processes.js';
import type { ScenarioContext } from './context.js';

export interface CapacityResult {
  setup: string;
  capacity: number;
  latencyMs: number;
  tasks: number;
  burstTasks: number;
  smallAccounts: number;
  smallTasks: number;
  providerLimitMs: number;
  makespanMs: number;
  /** makespan / N·L/C */
  makespanRatio: number;
  calls: number;
  ok: number;
  rateLimited: number;
  share429: number;
  peakInFlight: number;
  smallWorstMs: number;
  smallWorstShare: number;
  /** Calls answered × L / (C × makespan): how much of the provider's capacity the run used. */
  utilisation: number;
  /** The provider's answer → the task's completed_at: the service's own work per task. */
  afterAnswerMs: { p50: number; max: number };
  byStatus: Record<string, number>;
  /** Tasks not COMPLETED (failed, canceled, or not terminal when the run was given up), and creates refused. */
  notCompleted: number;
  refusedCreates: Record<string, number>;
}

const CAPACITY = 8;
const LATENCY_MS = 500;
const SMALL_ACCOUNTS = ['B', 'C', 'D'];
const BODY = { model: 'alpha-pro', parameters: { aspect_ratio: '1:1', resolution: '1K' } };

export async function capacityScenario(ctx: ScenarioContext): Promise<CapacityResult[]> {
  // --quick: a tenth of the tasks (the same shape), for trying the scenario out.
  const burstTasks = ctx.quick ? 34 : 340;
  const smallTasks = ctx.quick ? 2 : 20;
  const shape = { burstTasks, smallTasks };
  return [await embedded(ctx, shape), await cluster(ctx, shape)];
}

interface Shape {
  burstTasks: number;
  smallTasks: number;
}

/** `serve` with its in-process workers on SQLite. */
async function embedded(ctx: ScenarioContext, shape: Shape): Promise<CapacityResult> {
  const setup = 'embedded (`serve`, SQLite)';
  return withProvider(async (provider) => {
    const { server, auth, dataDir } = await ctx.launchService('service-capacity', {
      ...geminiEnv(provider),
      // The service's own default (one worker per core), not the bench's API-only 0: '' is unset.
      WORKER_CONCURRENCY: '',
    });
    try {
      const store = new SqliteStore(join(dataDir, 'imagegen.sqlite'));
      const smallKeys = await newKeys(store).finally(() => store.close());
      ctx.log(`capacity, ${setup}: ${describe(shape)}`);
      const run = await runCapacityScenario(scenario([server.url], auth.authorization.slice(7), smallKeys, shape));
      return resultOf(setup, provider, run, shape, ctx);
    } finally {
      await ctx.stop(server);
    }
  });
}

/** An API-only `serve` and 2 `worker` processes on one PostgreSQL schema. */
async function cluster(ctx: ScenarioContext, shape: Shape): Promise<CapacityResult> {
  const setup = 'API-only `serve` + 2 `worker` processes, PostgreSQL';
  return withProvider((provider) =>
    withSchema(async (schema) => {
      const store = new PostgresStore({ connectionString: DATABASE_URL, schema, poolSize: 2 });
      await store.migrate();
      const burstKey = (await createAccountWithKey(store, { name: 'A', tokens: 1e9, now: new Date() })).key;
      const smallKeys = await newKeys(store).finally(() => store.close());
      const env = serviceEnv(join(ctx.workDir, 'capacity-cluster'), {
        ...geminiEnv(provider),
        DATABASE_URL: urlFor(schema),
        LOG_LEVEL: 'info',
      });
      const processes: { stop(): Promise<void> }[] = [];
      try {
        const api = await startService({
          name: 'capacity-api',
          runtime: ctx.runtime,
          env: { ...env, WORKER_CONCURRENCY: '0' },
          logFile: join(ctx.workDir, 'capacity-api.log'),
        });
        processes.push(api);
        for (const n of [1, 2]) {
          processes.push(
            await startWorkerProcess({
              name: `capacity-worker-${n}`,
              runtime: ctx.runtime,
              // The service's own default slots per worker process, not the bench's 0: '' is unset.
              env: { ...env, WORKER_CONCURRENCY: '' },
              logFile: join(ctx.workDir, `capacity-worker-${n}.log`),
            }),
          );
        }
        ctx.log(`capacity, ${setup}: ${describe(shape)}`);
        const run = await runCapacityScenario(scenario([api.url], burstKey, smallKeys, shape));
        return resultOf(setup, provider, run, shape, ctx);
      } finally {
        await Promise.all(processes.map((p) => p.stop()));
      }
    }),
  );
}

async function withProvider<T>(fn: (provider: CapacityProvider) => Promise<T>): Promise<T> {
  const provider = await CapacityProvider.start({ capacity: CAPACITY, latencyMs: LATENCY_MS, retryDelay: 1 });
  try {
    return await fn(provider);
  } finally {
    await provider.close();
  }
}

function geminiEnv(provider: CapacityProvider): Record<string, string> {
  return { ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: 'bench', GEMINI_BASE_URL: provider.url };
}

/** One account with a key for each small account, written through the store. */
async function newKeys(store: SqliteStore | PostgresStore): Promise<string[]> {
  const keys: string[] = [];
  for (const name of SMALL_ACCOUNTS)
    keys.push((await createAccountWithKey(store, { name, tokens: 1e9, now: new Date() })).key);
  return keys;
}

function scenario(apiUrls: string[], burstKey: string, smallKeys: string[], shape: Shape): CapacityScenario {
  const small: ScenarioAccount[] = SMALL_ACCOUNTS.map((name, i) => ({
    name,
    key: smallKeys[i],
    tasks: shape.smallTasks,
  }));
  return {
    apiUrls,
    burst: { name: 'A', key: burstKey, tasks: shape.burstTasks },
    small,
    body: BODY,
    // Four times what today's 2 slots per process would take on the embedded default.
    giveUpAfterMs: 4 * providerLimitMs(tasksOf(shape), LATENCY_MS, 2),
  };
}

const tasksOf = (shape: Shape) => shape.burstTasks + SMALL_ACCOUNTS.length * shape.smallTasks;

const describe = (shape: Shape) =>
  `${tasksOf(shape)} tasks (${shape.burstTasks} from one account at once, then ${shape.smallTasks} from each of ${SMALL_ACCOUNTS.length} others), provider C = ${CAPACITY}, L = ${LATENCY_MS} ms`;

function resultOf(
  setup: string,
  provider: CapacityProvider,
  run: Awaited<ReturnType<typeof runCapacityScenario>>,
  shape: Shape,
  ctx: ScenarioContext,
): CapacityResult {
  const figures = scenarioFigures(run, 'A');
  const tasks = tasksOf(shape);
  const limitMs = providerLimitMs(tasks, LATENCY_MS, CAPACITY);
  const calls = provider.calls.length;
  const refused = Object.values(run.refusedCreates).reduce((n, c) => n + c, 0);
  const result: CapacityResult = {
    setup,
    capacity: CAPACITY,
    latencyMs: LATENCY_MS,
    tasks,
    burstTasks: shape.burstTasks,
    smallAccounts: SMALL_ACCOUNTS.length,
    smallTasks: shape.smallTasks,
    providerLimitMs: limitMs,
    makespanMs: figures.makespanMs,
    makespanRatio: figures.makespanMs / limitMs,
    calls,
    ok: provider.ok,
    rateLimited: provider.rateLimited,
    share429: calls === 0 ? 0 : provider.rateLimited / calls,
    peakInFlight: provider.peakInFlight,
    smallWorstMs: figures.smallWorstMs,
    smallWorstShare: figures.smallWorstShare,
    ...serviceOverhead(run, provider, figures.makespanMs),
    byStatus: figures.byStatus,
    notCompleted: figures.tasks - (figures.byStatus.COMPLETED ?? 0) + refused,
    refusedCreates: run.refusedCreates,
  };
  ctx.log(`  ${JSON.stringify(result)}`);
  return result;
}
