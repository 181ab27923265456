import { loadConfig } from '../src/config.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { buildApp } from '../src/http/app.js';
const config = loadConfig({ LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0' });
for (let i = 0; i < 6; i++) {
  const store = new SqliteStore(':memory:'); await store.migrate();
  const t0 = performance.now();
  const app = await buildApp({ config, store, mediaSigningSecret: 'x'.repeat(32), logger: false });
  await app.ready();
  console.log('build+ready ms', Math.round(performance.now() - t0));
  await app.close(); await store.close();
}
