import type { BackendLimitSettings } from '../core/backend-capacity.js';
import type { ImageGenerator } from '../generators/port.js';

/**
 * One model backend as a worker process runs it: the models it serves, its generator, how many of
 * its tasks this process runs at once, and for a remote backend the limit shared by the cluster.
 */
export interface WorkerBackend {
  /** `local`, `gemini`, `openai`: the label of its metrics and logs. */
  name: string;
  /** The models whose tasks it runs; absent = every model (a single-backend worker). */
  models?: readonly string[];
  generator: ImageGenerator;
  /**
   * Its tasks this process runs at once: the cores for the CPU-bound local renderer; for a remote
   * backend only a ceiling, since the shared limit decides (docs/design.md §4.2).
   */
  slots: number;
  /** A remote backend's adaptive limit on calls in flight, kept in the store for every process. */
  sharedLimit?: BackendLimitSettings;
}

/** A backend and this process's running count and known pause. */
export class BackendLane {
  running = 0;
  /** The shared limit as last seen, to log its changes. */
  lastLimit: number | null = null;
  /** Epoch ms before which no call is started (the provider asked us to wait). */
  pausedUntil = 0;
  constructor(readonly backend: WorkerBackend) {}

  hasRoom(now: number): boolean {
    return this.freeSlots(now) > 0;
  }

  /** Tasks this process may claim for the backend right now. */
  freeSlots(now: number): number {
    return now >= this.pausedUntil ? Math.max(0, this.backend.slots - this.running) : 0;
  }
}
