import { loadConfig } from '../config.js';
import { SqliteStore } from '../store/sqlite/sqlite-store.js';
import { buildApp } from './app.js';

/**
 * The OpenAPI document as YAML, generated from the routes of an app built on a throwaway
 * in-memory store with the default configuration, so the text never depends on the machine.
 */
export async function renderOpenApiYaml(): Promise<string> {
  const config = loadConfig({ LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', HOST: '127.0.0.1', PORT: '3000' });
  const store = new SqliteStore(':memory:');
  await store.migrate();
  const app = await buildApp({
    config,
    store,
    mediaSigningSecret: 'openapi-generation-only-not-a-secret',
    logger: false,
  });
  try {
    await app.ready();
    return app.swagger({ yaml: true });
  } finally {
    await app.close();
    await store.close();
  }
}
