import { loadConfig } from '../src/config.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { buildApp } from '../src/http/app.js';
import { createAccountWithKey } from '../src/services/api-keys.js';
const config = loadConfig({ LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', RATE_LIMIT_CREATES_PER_MIN: '1000000', RATE_LIMIT_REQUESTS_PER_MIN: '1000000', MAX_ACTIVE_TASKS: '100000' });
const store = new SqliteStore(':memory:'); await store.migrate();
const app = await buildApp({ config, store, mediaSigningSecret: 'x'.repeat(32), logger: false });
await app.ready();
const { key } = await createAccountWithKey(store, { name: 't', tokens: 100000000, now: new Date() });
const headers = { authorization: `Bearer ${key}` };
const bodies = [
  { model: 'alpha-pro', prompt: 'ab' },
  { model: 'beta-v5-pro', prompt: 'a harbour', parameters: { resolution: '4K' } },
  { model: 'alpha-pro', prompt: 'a harbour', parameters: { aspect_ratio: '16:9', resolution: '2K' } },
];
for (let round = 0; round < 3; round++) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < 600; i++) {
    await app.inject({ method: 'POST', url: i % 2 ? '/api/v1/images/estimates' : '/api/v1/images/generations', headers, payload: bodies[i % 3] });
  }
  const c = process.cpuUsage(c0);
  console.log('cpu ms per 600 requests', Math.round((c.user + c.system) / 1000));
}
await app.close(); await store.close();
