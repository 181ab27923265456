import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { access, mkdir, open, readdir, readFile, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertValidBlobKey, type BlobStore, type ByteRange } from './port.js';

// Temp files live under the root so the final rename never crosses a filesystem boundary.
// Keys cannot start a segment with a dot, so no key can ever name this directory.
const TEMP_DIR_NAME = '.tmp';
const DEFAULT_STALE_TEMP_AGE_MS = 60 * 60 * 1000;

/** Blobs as plain files under rootDir; a key maps to the same relative path. */
export class FsBlobStore implements BlobStore {
  private readonly tempDir: string;
  /**
   * Directories this store has made or found: each put would otherwise ask for them again, one
   * thread-pool round trip each. A directory removed behind the store's back is made again on the
   * ENOENT that follows.
   */
  private readonly knownDirectories = new Set<string>();
  private readonly directorySyncs = new Map<string, DirectorySync>();

  constructor(private readonly rootDir: string) {
    this.tempDir = join(rootDir, TEMP_DIR_NAME);
  }

  async put(key: string, body: Readable | Buffer): Promise<{ sizeBytes: number }> {
    const tempPath = join(this.tempDir, randomUUID());
    let file: FileHandle | undefined;
    try {
      const finalPath = this.pathOf(key);
      file = await this.inDirectory(this.tempDir, () => open(tempPath, 'wx'));
      const target = file;
      let size = 0;
      if (Buffer.isBuffer(body)) {
        await writeFully(target, body);
        size = body.length;
      } else {
        // A sink function rather than file.createWriteStream(): the handle must stay open for
        // the sync below, and a write stream that does not close itself never settles pipeline.
        await pipeline(body, async (chunks: AsyncIterable<Buffer | string>) => {
          for await (const chunk of chunks) {
            const bytes = Buffer.from(chunk);
            await writeFully(target, bytes);
            size += bytes.length;
          }
        });
      }
      // Data must be on disk before the rename makes it visible, or a crash could expose a
      // complete-looking name with missing content.
      await file.sync();
      await file.close();
      file = undefined;
      const directory = dirname(finalPath);
      await this.inDirectory(directory, () => rename(tempPath, finalPath));
      await this.directorySync(directory).sync();
      return { sizeBytes: size };
    } catch (error) {
      if (!Buffer.isBuffer(body)) body.destroy();
      await file?.close().catch(() => {});
      await rm(tempPath, { force: true });
      throw error;
    }
  }

  /** Runs op, which needs `directory` to exist: made first if this store has not seen it, or again on ENOENT. */
  private async inDirectory<T>(directory: string, op: () => Promise<T>): Promise<T> {
    if (!this.knownDirectories.has(directory)) {
      await mkdir(directory, { recursive: true });
      this.knownDirectories.add(directory);
      return op();
    }
    try {
      return await op();
    } catch (error) {
      if (!hasCode(error, 'ENOENT')) throw error;
      this.knownDirectories.delete(directory);
      return this.inDirectory(directory, op);
    }
  }

  private directorySync(directory: string): DirectorySync {
    const known = this.directorySyncs.get(directory);
    if (known) return known;
    const sync = new DirectorySync(directory);
    this.directorySyncs.set(directory, sync);
    return sync;
  }

  async get(key: string, range?: ByteRange): Promise<{ body: Readable; sizeBytes: number } | null> {
    const path = this.pathOf(key);
    let file: FileHandle;
    try {
      file = await open(path, 'r');
    } catch (error) {
      if (isMissing(error)) return null;
      throw error;
    }
    // Reading through the already open descriptor means a concurrent overwrite or delete
    // (each only changes the directory entry) cannot cut this read short.
    try {
      const stats = await file.stat();
      if (!stats.isFile()) {
        await file.close();
        return null;
      }
      if (!range) return { body: file.createReadStream(), sizeBytes: stats.size };
      const end = Math.min(range.end, stats.size - 1);
      return {
        body: file.createReadStream({ start: range.start, end }),
        sizeBytes: Math.max(0, end - range.start + 1),
      };
    } catch (error) {
      await file.close().catch(() => {});
      throw error;
    }
  }

  async getBuffer(key: string): Promise<Buffer | null> {
    try {
      return await readFile(this.pathOf(key));
    } catch (error) {
      if (isMissing(error) || hasCode(error, 'EISDIR')) return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.pathOf(key));
    } catch (error) {
      // EISDIR: the key names a directory of other blobs, not a blob.
      if (!isMissing(error) && !hasCode(error, 'EISDIR')) throw error;
    }
  }

  async ping(): Promise<void> {
    await mkdir(this.tempDir, { recursive: true });
    await access(this.tempDir, constants.R_OK | constants.W_OK);
  }

  /**
   * Removes temp files left by puts that were interrupted by a crash. Only files older than
   * olderThanMs go, so a put still running in another process sharing this root survives.
   * Returns how many were removed.
   */
  async sweepTemp(olderThanMs = DEFAULT_STALE_TEMP_AGE_MS): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.tempDir);
    } catch (error) {
      if (isMissing(error)) return 0;
      throw error;
    }
    const cutoff = Date.now() - olderThanMs;
    let removed = 0;
    for (const name of names) {
      const path = join(this.tempDir, name);
      try {
        if ((await stat(path)).mtimeMs > cutoff) continue;
        await rm(path, { force: true, recursive: true });
        removed += 1;
      } catch (error) {
        if (!isMissing(error)) throw error;
      }
    }
    return removed;
  }

  private pathOf(key: string): string {
    assertValidBlobKey(key);
    return join(this.rootDir, key);
  }
}

async function writeFully(file: FileHandle, bytes: Buffer): Promise<void> {
  for (let offset = 0; offset < bytes.length; ) {
    offset += (await file.write(bytes, offset)).bytesWritten;
  }
}

/**
 * Makes renames into one directory durable (the new entries survive a power loss), with one fsync
 * for the puts that wait at the same time: a sync that begins after a rename covers it, so a put
 * that arrives while one runs waits for the next, shared by every put that arrives meanwhile.
 */
class DirectorySync {
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  constructor(private readonly path: string) {}

  /** Resolves once a sync of the directory that began after this call has finished. */
  sync(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.running) return this.start();
    const queued = this.running
      .catch(() => {})
      .then(() => {
        this.queued = null;
        return this.start();
      });
    this.queued = queued;
    return queued;
  }

  private start(): Promise<void> {
    const run = syncDirectory(this.path).finally(() => {
      if (this.running === run) this.running = null;
    });
    this.running = run;
    return run;
  }
}

async function syncDirectory(path: string): Promise<void> {
  const directory = await open(path, 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

// ENOTDIR: a parent segment of the key is a blob, so the key itself cannot exist.
function isMissing(error: unknown): boolean {
  return hasCode(error, 'ENOENT') || hasCode(error, 'ENOTDIR');
}

function hasCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
