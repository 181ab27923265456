import { loadConfig } from '../src/config.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { buildApp } from '../src/http/app.js';
const config = loadConfig({ LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0' });
const times: number[] = [];
for (let i = 0; i < 12; i++) {
  const store = new SqliteStore(':memory:'); await store.migrate();
  const c0 = process.cpuUsage();
  const app = await buildApp({ config, store, mediaSigningSecret: 'x'.repeat(32), logger: false });
  await app.ready();
  const c = process.cpuUsage(c0); times.push((c.user + c.system) / 1000);
  await app.close(); await store.close();
}
times.sort((a, b) => a - b);
console.log('median build+ready cpu ms', Math.round(times[6]), 'min', Math.round(times[0]));
