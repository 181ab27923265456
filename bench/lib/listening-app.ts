import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import { loadConfig } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { releaseImageCaches } from '../../src/images/normalize-upload.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';

/**
 * The app in this process, listening on 127.0.0.1 (an ephemeral port), on dataDir, with no workers,
 * and an account without tokens with one API key: for the memory benches, which measure the
 * process they run in, set up as `serve` sets up its process. Configuration not set here comes
 * from the environment.
 */
export async function listenOnLoopback(dataDir: string) {
  releaseImageCaches();
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    WORKER_CONCURRENCY: '0',
    HOST: '127.0.0.1',
    PORT: '0',
  });
  const store = new SqliteStore(join(dataDir, 'imagegen.sqlite'));
  await store.migrate();
  const app = await buildApp({
    config,
    store,
    blobs: new FsBlobStore(join(dataDir, 'blobs')),
    mediaSigningSecret: randomBytes(32).toString('hex'),
    logger: false,
    rateLimitRedis: null,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const { key } = await createAccountWithKey(store, { name: 'bench', tokens: 0, now: new Date() });
  return {
    config,
    port,
    key,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

/** A full collection, a pause for what it freed to be returned, and another (with --expose-gc; a pause alone without). */
export async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 300));
  gc?.();
}
