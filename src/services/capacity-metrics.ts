import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { MODEL_IDS } from '../../schemas/catalog.js';
import {
  BACKEND_AVAILABILITIES,
  backendAvailability,
  callsAllowed,
  UPSTREAM_OUTCOME_KINDS,
  type UpstreamOutcomeKind,
} from '../core/backend-capacity.js';
import type { UpstreamUsage } from '../generators/port.js';
import type { BackendLimitStore } from '../store/port.js';

/**
 * The queue as every process that serves /metrics sees it (serve, api, worker): tasks waiting per
 * model and each backend's current adaptive limit. Both are read from the store at scrape time,
 * so they are the cluster's figures, whichever process is scraped.
 */
export function registerQueueMetrics(
  registry: Registry,
  store: Pick<BackendLimitStore, 'countQueuedTasks' | 'backendLimits'>,
  onError: (error: unknown) => void,
): void {
  const readAtScrape = <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (gauge: Gauge<L>) => Promise<void>,
  ) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        try {
          await fill(this);
        } catch (error) {
          // A scrape must not fail for it: the gauge keeps its last value, the error is logged.
          onError(error);
        }
      },
    });

  readAtScrape(
    'imagegen_tasks_waiting',
    'Tasks waiting to run (CREATED), per model, for the whole cluster',
    ['model'],
    async (gauge) => {
      const queued = await store.countQueuedTasks();
      for (const model of new Set([...MODEL_IDS, ...queued.keys()])) gauge.set({ model }, queued.get(model) ?? 0);
    },
  );
  readAtScrape(
    'imagegen_backend_concurrency_limit',
    'Calls a remote model backend may have in flight now (its adaptive limit, shared by the cluster)',
    ['backend'],
    async (gauge) => {
      for (const [backend, state] of await store.backendLimits()) gauge.set({ backend }, callsAllowed(state));
    },
  );
  readAtScrape(
    'imagegen_backend_circuit',
    'A remote model backend’s circuit breaker: 1 for its current state (available; unavailable: creates refused, no calls; probing: one call decides)',
    ['backend', 'state'],
    async (gauge) => {
      const now = Date.now();
      for (const [backend, limit] of await store.backendLimits()) {
        const current = backendAvailability(limit, now);
        for (const state of BACKEND_AVAILABILITIES) gauge.set({ backend, state }, state === current ? 1 : 0);
      }
    },
  );
}

/**
 * What a task worker reports (src/worker/task-worker.ts): declared here, beside its Prometheus
 * implementation, so that the worker imports it downward. Absent in tests that do not look.
 */
export interface WorkerMetrics {
  upstreamCall(backend: string, outcome: UpstreamOutcomeKind, durationMs: number): void;
  /** Tokens a provider reported for a call, per backend and catalog model (cost reconciliation). */
  upstreamUsage?(backend: string, model: string, usage: UpstreamUsage): void;
  tasksInProgress(backend: string, count: number): void;
}

/** What this worker process does: its tasks in progress, its upstream calls and their durations. */
export class PrometheusWorkerMetrics implements WorkerMetrics {
  private readonly inProgress: Gauge<'backend'>;
  private readonly calls: Counter<'backend' | 'outcome'>;
  private readonly durations: Histogram<'backend'>;
  private readonly tokens: Counter<'backend' | 'model' | 'direction'>;

  constructor(registry: Registry, backends: readonly string[]) {
    this.inProgress = new Gauge({
      name: 'imagegen_tasks_in_progress',
      help: 'Tasks this process is running, per backend',
      labelNames: ['backend'] as const,
      registers: [registry],
    });
    this.calls = new Counter({
      name: 'imagegen_upstream_calls_total',
      help: 'Generator calls by backend and outcome (ok, rate_limited, transient, permanent, unavailable)',
      labelNames: ['backend', 'outcome'] as const,
      registers: [registry],
    });
    this.durations = new Histogram({
      name: 'imagegen_generation_duration_seconds',
      help: 'Duration of successful generator calls, per backend',
      labelNames: ['backend'] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120],
      registers: [registry],
    });
    this.tokens = new Counter({
      name: 'imagegen_upstream_tokens_total',
      help: 'Tokens the provider reported (OpenAI usage, Gemini usageMetadata), per backend, catalog model and direction (input, output): for reconciling cost with its prices',
      labelNames: ['backend', 'model', 'direction'] as const,
      registers: [registry],
    });
    // Every series exists from the start, so that rates and alerts see zeros rather than gaps.
    for (const backend of backends) {
      this.inProgress.set({ backend }, 0);
      for (const outcome of UPSTREAM_OUTCOME_KINDS) this.calls.inc({ backend, outcome }, 0);
    }
  }

  upstreamCall(backend: string, outcome: UpstreamOutcomeKind, durationMs: number): void {
    this.calls.inc({ backend, outcome });
    if (outcome === 'ok') this.durations.observe({ backend }, durationMs / 1000);
  }

  upstreamUsage(backend: string, model: string, usage: UpstreamUsage): void {
    this.tokens.inc({ backend, model, direction: 'input' }, usage.inputTokens);
    this.tokens.inc({ backend, model, direction: 'output' }, usage.outputTokens);
  }

  tasksInProgress(backend: string, count: number): void {
    this.inProgress.set({ backend }, count);
  }
}
