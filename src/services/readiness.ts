import { statfs } from 'node:fs/promises';
import { Gauge, type Registry } from 'prom-client';

/**
 * What /readyz reports (docs/design.md §4): each dependency's state, and whether this node can accept work.
 * `degraded` is a dependency the node serves without (Redis: rate limits fail open), so it does
 * not make the node unready; `failing` does.
 */
export type DependencyState = 'ok' | 'degraded' | 'failing';

/** A check resolves to its state, or throws (the error says why) when the dependency is failing. */
export type DependencyCheck = () => Promise<'ok' | 'degraded'>;

/** A dependency that is ok when its ping answers. */
export const pingCheck =
  (ping: () => Promise<void>): DependencyCheck =>
  async () => {
    await ping();
    return 'ok';
  };

export interface Readiness {
  ready: boolean;
  checks: Record<string, DependencyState>;
  /** Why each failing or degraded check is so, for the log (never for the response). */
  causes: Record<string, unknown>;
}

/** The body of a /readyz answer, the same from the API and from a worker: each check's state. */
export function readinessReport(readiness: Readiness): {
  status: 'ok' | 'unavailable';
  checks: Record<string, DependencyState>;
} {
  return { status: readiness.ready ? 'ok' : 'unavailable', checks: readiness.checks };
}

export async function checkReadiness(checks: Record<string, DependencyCheck>): Promise<Readiness> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      try {
        return [name, await check(), undefined] as const;
      } catch (error) {
        return [name, 'failing' as const, error] as const;
      }
    }),
  );
  const readiness: Readiness = { ready: true, checks: {}, causes: {} };
  for (const [name, state, cause] of entries) {
    readiness.checks[name] = state;
    if (cause !== undefined) readiness.causes[name] = cause;
    if (state === 'failing') readiness.ready = false;
  }
  return readiness;
}

/**
 * The local disk under DATA_DIR (the embedded database, the files, the upload spool): failing
 * while its free space is below the threshold, or for a while after a write failed for want of
 * space (a full disk can look free again a moment later, when a spool file is removed, and fill
 * up at the next upload).
 */
export class DiskSpace {
  private lastFullAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly options: {
      path: string;
      minFreeBytes: number;
      /** How long a failed write keeps the disk failing. */
      fullForMs: number;
      now: () => Date;
    },
  ) {}

  /** A write failed with ENOSPC, SQLITE_FULL or the like. */
  noteFull(): void {
    this.lastFullAt = this.options.now().getTime();
  }

  readonly check: DependencyCheck = async () => {
    const sinceFull = this.options.now().getTime() - this.lastFullAt;
    if (sinceFull < this.options.fullForMs) throw new Error(`a write found the disk full ${sinceFull} ms ago`);
    const { bavail, bsize } = await statfs(this.options.path);
    const free = bavail * bsize;
    if (free < this.options.minFreeBytes)
      throw new Error(`${free} bytes free under ${this.options.path}, below ${this.options.minFreeBytes}`);
    return 'ok';
  };
}

/** After a write found the disk full, /readyz says so for this long (DiskSpace). */
const DISK_FULL_REMEMBERED_MS = 60_000;

/** The disk under DATA_DIR, failing below READY_MIN_FREE_MB free: what the API and a worker check. */
export function dataDirDiskSpace(
  config: { DATA_DIR: string; READY_MIN_FREE_MB: number },
  now: () => Date = () => new Date(),
): DiskSpace {
  return new DiskSpace({
    path: config.DATA_DIR,
    minFreeBytes: config.READY_MIN_FREE_MB * 1024 * 1024,
    fullForMs: DISK_FULL_REMEMBERED_MS,
    now,
  });
}

/**
 * The checks every process that runs work makes (the API adds `rate_limits`): the store and the
 * blob store answer their ping, and the disk under DATA_DIR has room.
 */
export function storageChecks(deps: {
  store: { ping(): Promise<void> };
  blobs: { ping(): Promise<void> };
  disk: DiskSpace;
}): Record<string, DependencyCheck> {
  return {
    store: pingCheck(() => deps.store.ping()),
    blobs: pingCheck(() => deps.blobs.ping()),
    disk: deps.disk.check,
  };
}

/**
 * `imagegen_dependency_up{dependency}`: 1 while a dependency is ok, 0 while it is failing or
 * degraded; read at scrape time, so an alert sees what /readyz would answer.
 */
export function registerDependencyMetrics(registry: Registry, checks: Record<string, DependencyCheck>): void {
  new Gauge({
    name: 'imagegen_dependency_up',
    help: 'Whether a dependency answers (1) or is failing or degraded (0), as /readyz reports it',
    labelNames: ['dependency'] as const,
    registers: [registry],
    async collect() {
      const { checks: states } = await checkReadiness(checks);
      for (const [dependency, state] of Object.entries(states)) this.set({ dependency }, state === 'ok' ? 1 : 0);
    },
  });
}
