import { existsSync, statSync } from 'node:fs';
import t from 'tap';
import type { Test } from 'tap';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { insertTask, newAccountWithTokens } from '../helpers/worker.js';

/**
 * With checkpointInBackground (serve and worker processes), WAL checkpoints run on a thread of
 * their own (BackgroundCheckpointer) instead of in the commits. A checkpoint is what copies
 * committed pages from the WAL into the database file, so the file growing while nothing else
 * checkpoints shows that the thread ran; the store below stays far under SQLite's own threshold
 * (1000 pages), where the committing connection would checkpoint by itself.
 */

async function storeWithTasks(t: Test, options: ConstructorParameters<typeof SqliteStore>[1]) {
  const path = `${t.testdir({})}/store.sqlite`;
  const store = new SqliteStore(path, options);
  await store.migrate();
  const sizeBefore = statSync(path).size;
  const accountId = await newAccountWithTokens(store, 1_000_000);
  await Promise.all(Array.from({ length: 200 }, () => insertTask(store, accountId)));
  return { store, path, sizeBefore, accountId };
}

async function waitUntil(condition: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
    if (condition()) return true;
  }
  return condition();
}

t.test('commits are copied into the database file by the background thread', async (t) => {
  const errors: string[] = [];
  const { store, path, sizeBefore, accountId } = await storeWithTasks(t, {
    checkpointInBackground: { onCheckpointError: (m) => errors.push(m) },
  });
  t.ok(await waitUntil(() => statSync(path).size > sizeBefore, 10_000), 'the database file grew: a checkpoint ran');
  t.ok(existsSync(`${path}-wal`));
  await store.close();
  // The WAL is removed when the last connection closes: the thread's connection was closed too.
  t.notOk(existsSync(`${path}-wal`), 'both connections closed');
  t.same(errors, []);

  const reopened = new SqliteStore(path);
  t.teardown(() => reopened.close());
  t.equal((await reopened.tasks.listTasks(accountId, { limit: 100 })).items.length, 100, 'the tasks are there');
});

t.test('without it, those commits stay in the WAL until the connection checkpoints', async (t) => {
  const { store, path, sizeBefore } = await storeWithTasks(t, {});
  t.teardown(() => store.close());
  await new Promise((r) => setTimeout(r, 300));
  t.equal(statSync(path).size, sizeBefore, 'nothing copied yet');
});
