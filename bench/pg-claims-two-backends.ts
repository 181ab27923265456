/**
 * The queries a worker process sends per task on PostgreSQL when it runs a backend per model (the
 * local renderer for alpha-pro, a remote backend with a shared limit for beta-v5-pro, both with a
 * no-op generator): 200 alpha-pro tasks created one at a time through a store of their own, each
 * waited for until COMPLETED, every query node-postgres sends from the worker's connections
 * counted (the tool's own read of each task's state included). Not part of `npm run bench`: a tool
 * beside bench/pg-round-trips.ts, for decision 0030's "a create wakes only the backends that run
 * its model".
 *
 *   tsx bench/pg-claims-two-backends.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import sharp from 'sharp';
import { FsBlobStore } from '../src/blobs/fs-blob-store.js';
import { createTask } from '../src/core/task.js';
import type { GeneratedImage, ImageGenerator } from '../src/generators/port.js';
import { newIdAt } from '../src/ids.js';
import { TaskEvents } from '../src/services/task-events.js';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import { TaskWorker } from '../src/worker/task-worker.js';
import { DATABASE_URL, withSchema } from './lib/postgres.js';

const counts = new Map<string, number>();
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (
  this: pg.Client & { connectionParameters: { application_name?: string } },
  ...args: unknown[]
) {
  const app = this.connectionParameters.application_name ?? '';
  counts.set(app, (counts.get(app) ?? 0) + 1);
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

const png = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#000' } })
  .png()
  .toBuffer();
class Noop implements ImageGenerator {
  readonly name = 'noop';
  async generate(): Promise<GeneratedImage[]> {
    return [{ bytes: png, contentType: 'image/png', width: 1, height: 1 }];
  }
}
const TASKS = 200;
await withSchema(async (schema) => {
  const url = (app: string) => `${DATABASE_URL}?application_name=${app}`;
  const api = new PostgresStore({ connectionString: url('api'), schema, poolSize: 2 });
  await api.migrate();
  const store = new PostgresStore({ connectionString: url('worker'), schema, poolSize: 6 });
  const events = new TaskEvents();
  await store.listen((signal) =>
    signal.kind === 'created' ? events.taskCreated(signal.model) : events.taskChanged(signal.taskId),
  );
  const dir = mkdtempSync(join(tmpdir(), 'claims-'));
  const worker = new TaskWorker({
    store,
    blobs: new FsBlobStore(dir),
    events,
    backends: [
      { name: 'local', models: ['alpha-pro'], generator: new Noop(), slots: 2 },
      {
        name: 'gemini',
        models: ['beta-v5-pro'],
        generator: new Noop(),
        slots: 64,
        sharedLimit: { initial: 4, max: 64 },
      },
    ],
    leaseMs: 30_000,
    maxAttempts: 3,
    deadlineMs: 3_600_000,
    generationTimeoutMs: 60_000,
    retryBaseMs: 1000,
    pollMs: 600_000,
    resultRetentionMs: 3_600_000,
  });
  const now = new Date();
  const account = await api.accounts.createAccount({ id: newIdAt(now), name: 'm', initialTokens: 1e9, now });
  worker.start();
  await new Promise((r) => setTimeout(r, 200));
  const before = counts.get('worker') ?? 0;
  for (let i = 0; i < TASKS; i++) {
    const task = createTask(
      { model: 'alpha-pro', prompt: `t ${i}` },
      { accountId: account.id, now: new Date(), newId: () => newIdAt(new Date()) },
    );
    const done = new Promise<void>((resolve) =>
      events.onChanged(
        task.id,
        () => void store.tasks.getTaskById(task.id).then((t) => t?.status === 'COMPLETED' && resolve()),
      ),
    );
    await api.tasks.insertTaskWithDebit(task, { maxActiveTasks: 1000 });
    await done;
  }
  const sent = (counts.get('worker') ?? 0) - before;
  // The test's own reads of each task's state (at least one per task) are counted too.
  console.log(
    `worker store: ${(sent / TASKS).toFixed(2)} queries per alpha-pro task (including this script's state reads)`,
  );
  await worker.stop(1000);
  await store.close();
  await api.close();
  rmSync(dir, { recursive: true, force: true });
});
