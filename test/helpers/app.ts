import type { Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import { loadConfig, type Config } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { TaskEvents } from '../../src/services/task-events.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';

export interface TestApp {
  app: FastifyInstance;
  store: SqliteStore;
  config: Config;
  dataDir: string;
  blobs: FsBlobStore;
  /** A new account with `tokens` and its key. */
  newAccount(tokens?: number): Promise<{ accountId: string; key: string; auth: { authorization: string } }>;
}

export const TEST_MEDIA_SIGNING_SECRET = 'test-signing-secret-0123456789abcdef';

/** One app on its own temp data dir (blobs under it too), closed when the test ends. */
export interface TestAppOptions {
  now?: () => Date;
  webhookLookup?: LookupAll;
  events?: TaskEvents;
}

export async function buildTestApp(t: Test, env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = t.testdir({});
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', ...env });
  const store = new SqliteStore(`${dataDir}/imagegen.sqlite`);
  await store.migrate();
  const blobs = new FsBlobStore(`${dataDir}/blobs`);
  const app = await buildApp({ config, store, blobs, mediaSigningSecret: TEST_MEDIA_SIGNING_SECRET, logger: false, ...options });
  t.teardown(async () => {
    await app.close();
    await store.close();
  });
  return {
    app,
    store,
    config,
    dataDir,
    blobs,
    async newAccount(tokens = 10_000) {
      const { account, key } = await createAccountWithKey(store, { name: 'test', tokens, now: new Date() });
      return { accountId: account.id, key, auth: { authorization: `Bearer ${key}` } };
    },
  };
}
