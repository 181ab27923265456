/**
 * The thread of a BackgroundCheckpointer: its own connection to the store's file, running a
 * PASSIVE checkpoint a little after the store tells it of commits. A checkpoint runs on this
 * thread's loop, so there is never more than one at a time.
 */
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

export type CheckpointerMessage = 'committed' | 'stop';
export type CheckpointerReport = { checkpointError: string };

const { filename } = workerData as { filename: string };
const port = parentPort!;
const db = new Database(filename);
// A checkpoint waits for a moment only; the next commit asks again.
db.pragma('busy_timeout = 100');

/**
 * A checkpoint waits this long after the commit that asked for it, so that it copies the pages of
 * every commit in that time at once: the hot pages of a busy store (the tail of each index, the
 * accounts' rows) are then written to the database file and synced once, not once per commit.
 * Checkpointing at once after each commit gained 2–8 % more creates per second over SQLite's
 * checkpoints in the commits; waiting 50 ms, 26–36 % (docs/performance-history.md, "Optimisations").
 */
const COALESCE_MS = 50;

let pending: NodeJS.Timeout | null = null;

function checkpoint(): void {
  pending = null;
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (error) {
    port.postMessage({ checkpointError: (error as Error).message } satisfies CheckpointerReport);
  }
}

port.on('message', (message: CheckpointerMessage) => {
  if (message === 'stop') {
    if (pending) clearTimeout(pending);
    db.close();
    // With the port closed the thread has nothing left to do and exits, which stop() awaits.
    port.close();
    return;
  }
  // Commits made before the checkpoint starts are all in it.
  pending ??= setTimeout(checkpoint, COALESCE_MS);
});
