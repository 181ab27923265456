import { randomUUID } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

/**
 * Spool files (DATA_DIR/tmp) hold an upload's bytes while it is received and checked; the handler
 * removes its file when it is done. A process killed meanwhile leaves its files behind, and a sweep
 * (at start and by housekeeping) removes them. Each name carries the host and pid of the process
 * spooling it, so a sweep tells the files of a live upload (this process's or another's on the
 * machine) from those of a dead process at once, instead of waiting for them to age.
 */
const SPOOL_NAME = /^upload-(.+)-(\d+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Any spool file is removed once it is this old, and one whose owner cannot be checked (another
 * host sharing the directory, a name from before owners were recorded) not before. Far beyond any
 * upload: its body has HTTP_REQUEST_TIMEOUT_MS to arrive, and its file is removed once checked.
 */
export const UNOWNED_SPOOL_MAX_AGE_MS = 60 * 60 * 1000;

const THIS_HOST = hostname();

export function spoolFileName(): string {
  return `upload-${THIS_HOST}-${process.pid}-${randomUUID()}`;
}

/** Removes the spool files of dead processes on this host, and unowned ones past their age. */
export async function sweepSpoolFiles(dir: string, now: Date): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  let removed = 0;
  for (const name of names) {
    const path = join(dir, name);
    try {
      const owner = SPOOL_NAME.exec(name);
      const ownerDead = owner !== null && owner[1] === THIS_HOST && !processIsAlive(Number(owner[2]));
      if (!ownerDead && (await stat(path)).mtimeMs > now.getTime() - UNOWNED_SPOOL_MAX_AGE_MS) continue;
      await rm(path, { force: true });
      removed += 1;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return removed;
}

function processIsAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
