import { join } from 'node:path';
import { Registry } from 'prom-client';
import t from 'tap';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import { buildWorkerMetricsApp } from '../../src/http/worker-metrics-app.js';
import { DiskSpace, registerDependencyMetrics, storageChecks } from '../../src/services/readiness.js';
import { testStoreAdapter } from '../helpers/store.js';

/**
 * A `worker` process's /readyz (on its metrics port) and `imagegen_dependency_up`: the same report
 * as the API's, over the dependencies a worker uses (store, blob store, disk; no Redis). The CLI
 * wiring, with PostgreSQL cut for real: test/cluster/postgres-cuts.test.ts.
 */

t.test('worker /readyz: 200 while its dependencies answer; a full disk or a store away: 503 naming it', async (t) => {
  const { store } = await testStoreAdapter().open(t);
  const dir = t.testdir({});
  const disk = new DiskSpace({ path: dir, minFreeBytes: 0, fullForMs: 60_000, now: () => new Date() });
  const checks = storageChecks({ store, blobs: new FsBlobStore(join(dir, 'blobs')), disk });
  const registry = new Registry();
  registerDependencyMetrics(registry, checks);
  const logged: string[] = [];
  const app = buildWorkerMetricsApp(registry, {
    readinessChecks: checks,
    onCheckFailed: (check) => logged.push(check),
  });
  t.teardown(() => app.close());
  const readyz = async () => {
    const response = await app.inject({ method: 'GET', url: '/readyz' });
    return { status: response.statusCode, body: response.json() };
  };
  const metrics = async () => (await app.inject({ method: 'GET', url: '/metrics' })).payload;

  t.same(await readyz(), { status: 200, body: { status: 'ok', checks: { store: 'ok', blobs: 'ok', disk: 'ok' } } });
  t.match(await metrics(), /imagegen_dependency_up\{dependency="store"\} 1/);

  disk.noteFull();
  t.same(await readyz(), {
    status: 503,
    body: { status: 'unavailable', checks: { store: 'ok', blobs: 'ok', disk: 'failing' } },
  });
  t.match(await metrics(), /imagegen_dependency_up\{dependency="disk"\} 0/);

  await store.close();
  t.match(await readyz(), { status: 503, body: { checks: { store: 'failing' } } });
  t.match(await metrics(), /imagegen_dependency_up\{dependency="store"\} 0/);
  t.ok(logged.includes('disk') && logged.includes('store'), 'each failing check logged with its cause');
});
