import type { Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type Config } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/port.js';

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  config: Config;
  dataDir: string;
  /** A new account with `tokens` and its key. */
  newAccount(tokens?: number): Promise<{ accountId: string; key: string; auth: { authorization: string } }>;
}

/** One app on its own temp data dir, closed when the test ends. */
export async function buildTestApp(t: Test, env: Record<string, string> = {}): Promise<TestApp> {
  const dataDir = t.testdir({});
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', ...env });
  const store = new SqliteStore(`${dataDir}/imagegen.sqlite`);
  await store.migrate();
  const app = await buildApp({ config, store, mediaSigningSecret: 'test-signing-secret-0123456789abcdef', logger: false });
  t.teardown(async () => {
    await app.close();
    await store.close();
  });
  return {
    app,
    store,
    config,
    dataDir,
    async newAccount(tokens = 10_000) {
      const { account, key } = await createAccountWithKey(store, { name: 'test', tokens, now: new Date() });
      return { accountId: account.id, key, auth: { authorization: `Bearer ${key}` } };
    },
  };
}
