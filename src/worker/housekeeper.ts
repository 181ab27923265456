import type { BlobStore } from '../blobs/port.js';
import { sweepExpiredMedia } from '../services/media-sweeper.js';
import type { Store } from '../store/port.js';
import type { WorkerLog } from './worker-log.js';

export interface HousekeeperOptions {
  store: Pick<Store, 'media' | 'idempotencyKeys'>;
  blobs: BlobStore;
  intervalMs: number;
  uploadTempDir?: string;
  now?: () => Date;
  log?: WorkerLog;
}

/**
 * A minute of keys at a thousand idempotent creates per second is 60 000 rows. Deleted in one
 * statement, 100 000 held the event loop (the API's too, in `serve`) for 250–340 ms; in slices of
 * this size each call takes about 2–3 ms and requests run between them (measured with a one-off probe, since removed; docs/performance-history.md).
 */
const IDEMPOTENCY_KEYS_PER_DELETE = 1000;

/**
 * Retention on a timer: expired media (rows, then blobs) and expired idempotency keys. Every step
 * is idempotent, so several worker processes may run it at once.
 */
export class Housekeeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private readonly now: () => Date;

  constructor(private readonly options: HousekeeperOptions) {
    this.now = options.now ?? (() => new Date());
  }

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.runOnce()
        .catch((error: unknown) => this.options.log?.error({ err: error }, 'housekeeping failed'))
        .finally(() => (this.running = null));
    }, this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  async runOnce(): Promise<void> {
    const { store, blobs, log } = this.options;
    for (let more = true; more; ) {
      const result = await sweepExpiredMedia({
        store: store.media,
        blobs,
        now: this.now(),
        uploadTempDir: this.options.uploadTempDir,
        log,
      });
      more = result.more;
      if (result.expiredMedia || result.blobsDeleted) log?.info({ ...result }, 'expired media swept');
    }
    const leftovers = await blobs.sweepTemp();
    if (leftovers) log?.info({ removed: leftovers }, 'interrupted blob writes swept');
    let keys = 0;
    for (;;) {
      const deleted = await store.idempotencyKeys.deleteExpiredIdempotencyKeys(this.now(), IDEMPOTENCY_KEYS_PER_DELETE);
      keys += deleted;
      if (deleted < IDEMPOTENCY_KEYS_PER_DELETE) break;
    }
    if (keys) log?.info({ deleted: keys }, 'expired idempotency keys swept');
  }
}
