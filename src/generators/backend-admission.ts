/** What the API checks of a model's backend before it accepts (and charges) a task: its size plan and its circuit. */
import { modelBackends, upstreamModels, type Config, type GeneratorBackend } from '../config.js';
import { backendAvailability, type BackendAvailability } from '../core/backend-capacity.js';
import type { BackendLimitStore } from '../store/port.js';
import {
  nativeSize,
  openAiModelFamily,
  openAiSizeRule,
  upscaleFactor,
  type BackendSizePlan,
  type ResolutionCheck,
} from '../core/size-plan.js';

/** What each catalog model's configured backend makes of a cell (src/core/size-plan.ts). */
export function backendSizePlans(config: Config): Record<string, BackendSizePlan> {
  const upstream = upstreamModels(config);
  return Object.fromEntries(
    Object.entries(modelBackends(config)).map(([model, backend]) => [
      model,
      sizePlanOf(config, backend, upstream[model] ?? ''),
    ]),
  );
}

function sizePlanOf(config: Config, backend: GeneratorBackend, upstreamModel: string): BackendSizePlan {
  switch (backend) {
    case 'local':
      return { backend };
    case 'gemini':
      return { backend, model: upstreamModel };
    case 'openai': {
      const family = openAiModelFamily(upstreamModel, config.OPENAI_MODEL_FAMILY);
      return { backend, rule: openAiSizeRule(upstreamModel, config.OPENAI_IMAGE_SIZES, family) };
    }
  }
}

/**
 * The enlargement a catalog cell would need on its model's backend, and whether MAX_UPSCALE
 * allows it: checked before a task is charged (docs/design.md §3.2: nothing upscaled in secret).
 */
export function upscaleCheck(plans: Record<string, BackendSizePlan>, maxUpscale: number): ResolutionCheck {
  return (model, cell) => {
    const plan = plans[model] ?? { backend: 'local' };
    const native = nativeSize(plan, cell);
    const factor = upscaleFactor(native, { width: cell.width, height: cell.height });
    return { native, factor, allowed: factor <= maxUpscale };
  };
}

/**
 * For a create: milliseconds until the model's remote backend may be tried again when its circuit
 * is open (found unavailable by a worker's call, shared through the store), else null.
 */
export function backendCircuit(config: Config, store: Pick<BackendLimitStore, 'backendLimits'>) {
  const backends = modelBackends(config);
  return async (model: string, now: Date): Promise<number | null> => {
    const backend = backends[model];
    if (backend === undefined || backend === 'local') return null;
    const state = (await store.backendLimits()).get(backend);
    if (!state || backendAvailability(state, now.getTime()) !== 'unavailable') return null;
    return (state.unavailableUntil ?? now.getTime()) - now.getTime();
  };
}

/** A backend's circuit breaker in the usual terms: closed (calls go), open (none, creates refused), half-open (one probe). */
export type CircuitState = 'closed' | 'open' | 'half_open';
const CIRCUIT_OF: Record<BackendAvailability, CircuitState> = {
  available: 'closed',
  unavailable: 'open',
  probing: 'half_open',
};

/**
 * For /readyz: each configured remote backend's circuit and, while open, until when. A backend the
 * cluster has not called yet is closed.
 */
export function backendCircuitStates(config: Config, store: Pick<BackendLimitStore, 'backendLimits'>) {
  const remote = [...new Set(Object.values(modelBackends(config)))].filter((backend) => backend !== 'local').sort();
  return async (now: Date): Promise<Record<string, { circuit: CircuitState; until?: string }>> => {
    if (remote.length === 0) return {};
    const limits = await store.backendLimits();
    return Object.fromEntries(
      remote.map((backend) => {
        const state = limits.get(backend);
        const circuit = state ? CIRCUIT_OF[backendAvailability(state, now.getTime())] : 'closed';
        const until = circuit === 'open' ? new Date(state!.unavailableUntil!).toISOString() : undefined;
        return [backend, until ? { circuit, until } : { circuit }];
      }),
    );
  };
}
