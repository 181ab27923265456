import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CheckpointerMessage, CheckpointerReport } from './checkpoint-worker.js';

/**
 * WAL checkpoints on a thread of their own. A checkpoint copies the pages committed to the WAL back
 * into the database file and syncs it; run by the committing connection (SQLite's default, every
 * 1000 pages) it held the event loop for about a tenth of a create's time under load (docs/performance-history.md,
 * "Optimisations"). Here the store only posts a message after each commit, and a PASSIVE checkpoint
 * runs beside the next requests: it blocks neither the writer nor readers.
 */
export class BackgroundCheckpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(filename: string, onError: (message: string) => void) {
    // The worker is the sibling module, as TypeScript under a loader or as compiled JavaScript.
    const ownExtension = extname(fileURLToPath(import.meta.url));
    this.worker = new Worker(new URL(`./checkpoint-worker${ownExtension}`, import.meta.url), {
      workerData: { filename },
    });
    this.worker.unref();
    this.worker.on('message', (report: CheckpointerReport) => onError(report.checkpointError));
    this.exited = new Promise((resolve) => {
      this.worker.once('exit', () => resolve());
      this.worker.once('error', (error) => {
        onError(error.message);
        resolve();
      });
    });
  }

  /** After a commit; the thread gathers the commits of its next 50 ms into one checkpoint. */
  committed(): void {
    this.worker.postMessage('committed' satisfies CheckpointerMessage);
  }

  async stop(): Promise<void> {
    // Unreferenced so far so that a store left open does not keep a process alive; a close waits.
    this.worker.ref();
    this.worker.postMessage('stop' satisfies CheckpointerMessage);
    await this.exited;
  }
}
