import fs from 'node:fs';
import path from 'node:path';
import type { BlobStore } from './blobs/port.js';
import { FsBlobStore } from './blobs/fs-blob-store.js';
import { sqlitePath, type Config } from './config.js';
import { loadOrCreateSecret } from './secrets.js';
import type { Store } from './store/port.js';
import { SqliteStore } from './store/sqlite/sqlite-store.js';

/** The adapters a process runs on, chosen from configuration. */
export interface Runtime {
  store: Store;
  blobs: BlobStore;
  mediaSigningSecret: string;
  close(): Promise<void>;
}

export class UnsupportedConfigurationError extends Error {}

/**
 * @param longRunning serve and worker: checkpoints move to a thread of their own. A one-shot CLI
 * command makes a handful of commits and needs no thread.
 */
export function openStore(config: Config, options: { longRunning?: boolean } = {}): Store {
  if (config.DATABASE_URL) {
    throw new UnsupportedConfigurationError('DATABASE_URL (PostgreSQL) is not supported by this build yet; unset it to use the embedded SQLite store.');
  }
  fs.mkdirSync(config.DATA_DIR, { recursive: true });
  return new SqliteStore(sqlitePath(config), {
    checkpointInBackground: options.longRunning
      ? { onCheckpointError: (message) => process.emitWarning(`SQLite checkpoint failed: ${message}`) }
      : undefined,
  });
}

export function openBlobStore(config: Config): BlobStore {
  if (config.BLOB_STORE === 's3') {
    throw new UnsupportedConfigurationError('BLOB_STORE=s3 is not supported by this build yet; use fs.');
  }
  return new FsBlobStore(path.join(config.DATA_DIR, 'blobs'));
}

export async function openRuntime(config: Config, options: { longRunning?: boolean } = {}): Promise<Runtime> {
  const store = openStore(config, options);
  await store.migrate();
  const blobs = openBlobStore(config);
  const mediaSigningSecret = config.MEDIA_SIGNING_SECRET ?? loadOrCreateSecret(config.DATA_DIR, 'media-signing-secret');
  return {
    store,
    blobs,
    mediaSigningSecret,
    close: () => store.close(),
  };
}
