import t, { type Test } from 'tap';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/port.js';
import { postgresAtSchemaVersion, postgresTestUrl, reachable } from '../helpers/postgres.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';
import { needsStore, STORE_ADAPTERS, claimNextTask } from '../helpers/store.js';

/**
 * Decision 0024: a task keeps its output format, compression and end-user id on every store, and a
 * task stored before they existed reads as the PNG task it was, with no end user.
 */
const T0 = Date.parse('2026-11-01T00:00:00Z');
const OLD_TASK_ID = '019a3d1c-0000-7000-8000-000000000001';
const SQLITE_BEFORE = SQLITE_MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN output_format'));
const POSTGRES_BEFORE = POSTGRES_MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN output_format'));

for (const adapter of STORE_ADAPTERS) {
  t.test(
    `${adapter.kind}: a task keeps its output format, compression and end user`,
    await needsStore(adapter.kind),
    async (t) => {
      const { store } = await adapter.open(t);
      const now = new Date();
      const account = await store.accounts.createAccount({ id: newIdAt(now), name: 'a', initialTokens: 100, now });
      const webp = createTask(
        { model: 'alpha-pro', prompt: 'a lighthouse', parameters: { output_format: 'webp', output_compression: 35 } },
        { accountId: account.id, now, newId: () => newIdAt(now), endUserId: 'user "7" / ünïcode' },
      );
      const png = createTask(
        { model: 'beta-v5-pro', prompt: 'a lighthouse' },
        { accountId: account.id, now, newId: () => newIdAt(now) },
      );
      for (const task of [webp, png]) await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });
      const readWebp = await store.tasks.getTask(account.id, webp.id);
      t.match(readWebp, {
        parameters: { aspect_ratio: '1:1', resolution: '1K', output_format: 'webp', output_compression: 35 },
        endUserId: 'user "7" / ünïcode',
      });
      const readPng = await store.tasks.getTaskById(png.id);
      t.strictSame(readPng?.parameters, {
        aspect_ratio: '1:1',
        resolution: '1K',
        output_format: 'png',
        output_compression: null,
        seed: null,
      });
      t.equal(readPng?.endUserId, null);
      const claimed = await claimNextTask(store.tasks, {
        now,
        leaseMs: 60_000,
        maxAttempts: 3,
        deadlineMs: 3_600_000,
      });
      t.ok(claimed && [webp.id, png.id].includes(claimed.id), 'a claim reads the new columns too');
      t.equal(claimed?.parameters.output_format, claimed?.id === webp.id ? 'webp' : 'png');
    },
  );
}

async function checkOldTask(t: Test, store: Store): Promise<void> {
  const task = await store.tasks.getTaskById(OLD_TASK_ID);
  t.strictSame(task?.parameters, {
    aspect_ratio: '16:9',
    resolution: '2K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.equal(task?.endUserId, null);
  t.match(task, { model: 'alpha-pro', prompt: 'before formats', width: 2752, height: 1536, cost: 25 });
}

t.test('SQLite: a task stored before output formats reads as a PNG task with no end user', async (t) => {
  const path = `${t.testdir({})}/imagegen.sqlite`;
  const old = openAtSchemaVersion(path, SQLITE_BEFORE);
  old.prepare("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 75, ?)").run(T0);
  old
    .prepare(
      `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
         cost, generated, created_at) VALUES (?, 'a', 'CREATED', 'alpha-pro', 'before formats', '[]', '16:9', '2K', 2752, 1536, 25, '[]', ?)`,
    )
    .run(OLD_TASK_ID, T0);
  old.close();
  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  await store.migrate();
  await checkOldTask(t, store);
});

t.test(
  'PostgreSQL: a task stored before output formats reads as a PNG task with no end user',
  { skip: !(await reachable()) && `no PostgreSQL at ${postgresTestUrl()}` },
  async (t) => {
    const { schema } = await postgresAtSchemaVersion(t, POSTGRES_BEFORE, async (client) => {
      await client.query("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 75, $1)", [
        new Date(T0),
      ]);
      await client.query(
        `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
           cost, generated, created_at, run_after) VALUES ($1, 'a', 'CREATED', 'alpha-pro', 'before formats', '[]', '16:9', '2K', 2752, 1536, 25, '[]', $2, $2)`,
        [OLD_TASK_ID, new Date(T0)],
      );
    });
    const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
    t.teardown(() => store.close());
    await store.migrate();
    await checkOldTask(t, store);
  },
);
