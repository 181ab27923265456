import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FsBlobStore } from '../src/blobs/fs-blob-store.js';
import { loadConfig } from '../src/config.js';
import { buildApp } from '../src/http/app.js';
import { openApiYaml } from '../src/http/plugins/openapi.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

/**
 * The OpenAPI document as YAML, generated from the routes of an app built on a throwaway
 * in-memory store and blob directory with the default configuration, so the text never depends on
 * the machine. A build tool, not part of the service: `npm run openapi` writes it, a test compares.
 */
export async function renderOpenApiYaml(): Promise<string> {
  const dataDir = mkdtempSync(join(tmpdir(), 'openapi-'));
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    WORKER_CONCURRENCY: '0',
    HOST: '127.0.0.1',
    PORT: '3000',
    DATA_DIR: dataDir,
  });
  const store = new SqliteStore(':memory:');
  await store.migrate();
  const app = await buildApp({
    config,
    store,
    blobs: new FsBlobStore(join(dataDir, 'blobs')),
    mediaSigningSecret: 'openapi-generation-only-not-a-secret',
    logger: false,
    rateLimitRedis: null,
  });
  try {
    await app.ready();
    return openApiYaml(app.swagger());
  } finally {
    await app.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
