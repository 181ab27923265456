import { createHmac } from 'node:crypto';
import type { BlobStore } from '../blobs/port.js';
import { callsAllowed, type UpstreamOutcome } from '../core/backend-capacity.js';
import type { TaskRecord } from '../core/task.js';
import { type GeneratedImage, GenerationError, type GenerationInput } from '../generators/port.js';
import type { WorkerMetrics } from '../services/capacity-metrics.js';
import type { Store } from '../store/port.js';
import type { BackendLane } from './backend-lane.js';
import { loadTaskReferences } from './task-references.js';
import type { WorkerLog } from './worker-log.js';

export interface GeneratorCallOptions {
  store: Pick<Store, 'media' | 'backendLimits'>;
  blobs: BlobStore;
  now: () => Date;
  log: WorkerLog;
  metrics?: WorkerMetrics;
  /** Key of the keyed hash sent to providers as the account's safety identifier; unset = none sent. */
  safetyIdentifierKey?: string;
  /** The call's slot is free for the cluster again (its outcome is recorded in the shared limit). */
  onCallRecorded: () => void;
}

/** Loads the task's references and calls its backend's generator for its images. */
export async function generateImages(
  lane: BackendLane,
  task: TaskRecord,
  signal: AbortSignal,
  options: GeneratorCallOptions,
): Promise<GeneratedImage[]> {
  const references = await loadTaskReferences(
    { store: options.store.media, blobs: options.blobs },
    task,
    lane.backend.generator,
    signal,
  );
  signal.throwIfAborted();
  const input: GenerationInput = {
    model: task.model,
    prompt: task.prompt,
    aspectRatio: task.parameters.aspect_ratio,
    resolution: task.parameters.resolution,
    outputFormat: task.parameters.output_format,
    outputCompression: task.parameters.output_compression,
    ...(task.parameters.seed === null ? {} : { seed: task.parameters.seed }),
    width: task.width,
    height: task.height,
    references,
    safetyIdentifier: options.safetyIdentifierKey
      ? safetyIdentifier(options.safetyIdentifierKey, task.accountId, task.endUserId)
      : undefined,
  };
  return callGenerator(lane, task, input, signal, options);
}

/**
 * Calls the backend's generator and records what the call came to: in the metrics, and in the
 * backend's shared limit (before the task leaves IN_PROGRESS, so the call still counts in flight).
 */
async function callGenerator(
  lane: BackendLane,
  task: TaskRecord,
  input: GenerationInput,
  signal: AbortSignal,
  options: GeneratorCallOptions,
): Promise<GeneratedImage[]> {
  const started = performance.now();
  let outcome: UpstreamOutcome;
  try {
    const images = await lane.backend.generator.generate(input, signal);
    outcome = { kind: 'ok', durationMs: performance.now() - started };
    for (const { usage } of images) if (usage) options.metrics?.upstreamUsage?.(lane.backend.name, task.model, usage);
    return images;
  } catch (error) {
    outcome = outcomeOf(error);
    throw error;
  } finally {
    // An abort (cancel, shutdown, timeout) is ours, not the provider's answer.
    if (!signal.aborted || outcome!.kind !== 'transient') await recordCall(lane, task, outcome!, started, options);
  }
}

async function recordCall(
  lane: BackendLane,
  task: TaskRecord,
  outcome: UpstreamOutcome,
  startedAt: number,
  options: GeneratorCallOptions,
): Promise<void> {
  const { backend } = lane;
  const { log, now } = options;
  options.metrics?.upstreamCall(backend.name, outcome.kind, performance.now() - startedAt);
  if (!backend.sharedLimit) return;
  try {
    const before = lane.pausedUntil;
    const state = await options.store.backendLimits.recordUpstreamCall({
      backend: backend.name,
      task: { id: task.id, attempt: task.attempt },
      models: backend.models ?? [],
      outcome,
      now: now(),
      settings: backend.sharedLimit,
    });
    lane.pausedUntil = state.pausedUntil ?? 0;
    // The call's slot is free for the cluster now, while this task stores its result.
    options.onCallRecorded();
    const limit = callsAllowed(state);
    if (limit !== lane.lastLimit) {
      log.info({ backend: backend.name, limit, was: lane.lastLimit, outcome: outcome.kind }, 'backend limit changed');
      lane.lastLimit = limit;
    }
    if (lane.pausedUntil > before && lane.pausedUntil > now().getTime())
      log.info({ backend: backend.name, paused_ms: lane.pausedUntil - now().getTime() }, 'backend paused');
  } catch (error) {
    // The limit is bookkeeping: a store that cannot take it now must not fail the task.
    log.warn({ err: error, backend: backend.name }, 'could not record the upstream call');
  }
}

/**
 * The account as the provider sees it: HMAC-SHA256 of its id under the deployment's key, so one
 * abusive account can be told apart without giving the provider our ids (stable across calls).
 * With an end user (the OpenAI face's `user`), the hash is of the account and that user, so the
 * provider can tell one abusive user of an account's product from its other users; an account's
 * tasks without one keep the account's own identifier. The JSON array keeps the two apart
 * whatever characters the end-user id holds.
 */
export function safetyIdentifier(key: string, accountId: string, endUserId: string | null = null): string {
  const subject = endUserId === null ? accountId : JSON.stringify([accountId, endUserId]);
  return createHmac('sha256', key).update(`safety-identifier:${subject}`).digest('hex').slice(0, 32);
}

/** Failures that say the backend cannot serve anyone for now (decision 0011). */
const BACKEND_UNAVAILABLE_CODES = new Set(['generator_unavailable', 'upstream_quota_exhausted']);

/** What a failed generator call means for the backend's limit and metrics. */
function outcomeOf(error: unknown): UpstreamOutcome {
  if (error instanceof GenerationError) {
    if (error.capacity) return { kind: 'rate_limited', retryAfterMs: error.retryAfterMs };
    // Our key, billing or an exhausted quota: the backend's circuit opens (no calls, creates refused).
    if (BACKEND_UNAVAILABLE_CODES.has(error.code)) return { kind: 'unavailable', retryAfterMs: error.retryAfterMs };
    return { kind: error.transient ? 'transient' : 'permanent' };
  }
  return { kind: 'transient' };
}
