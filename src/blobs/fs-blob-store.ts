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

  constructor(private readonly rootDir: string) {
    this.tempDir = join(rootDir, TEMP_DIR_NAME);
  }

  async put(key: string, body: Readable | Buffer): Promise<{ sizeBytes: number }> {
    const tempPath = join(this.tempDir, randomUUID());
    let file: FileHandle | undefined;
    try {
      const finalPath = this.pathOf(key);
      await mkdir(this.tempDir, { recursive: true });
      file = await open(tempPath, 'wx');
      const target = file;
      if (Buffer.isBuffer(body)) {
        await writeFully(target, body);
      } else {
        // A sink function rather than file.createWriteStream(): the handle must stay open for
        // the sync below, and a write stream that does not close itself never settles pipeline.
        await pipeline(body, async (chunks: AsyncIterable<Buffer | string>) => {
          for await (const chunk of chunks) await writeFully(target, Buffer.from(chunk));
        });
      }
      // Data must be on disk before the rename makes it visible, or a crash could expose a
      // complete-looking name with missing content.
      await file.sync();
      const { size } = await file.stat();
      await file.close();
      file = undefined;
      await mkdir(dirname(finalPath), { recursive: true });
      await rename(tempPath, finalPath);
      await syncDirectory(dirname(finalPath));
      return { sizeBytes: size };
    } catch (error) {
      if (!Buffer.isBuffer(body)) body.destroy();
      await file?.close().catch(() => {});
      await rm(tempPath, { force: true });
      throw error;
    }
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

/** Makes a rename durable: the new directory entry survives a power loss. */
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
