import t, { type Test } from 'tap';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { storeUpload } from '../helpers/uploads.js';

/**
 * insertTaskWithDebit checks a task's image references in the transaction that creates it and
 * charges for it: each must be an upload of the task's account, unexpired when the task is made.
 */

async function openStore(t: Test) {
  const store = new SqliteStore(`${t.testdir({})}/store.sqlite`);
  await store.migrate();
  t.teardown(() => store.close());
  const now = new Date();
  const account = await store.createAccount({ id: newIdAt(now), name: 'refs', initialTokens: 1000, now });
  const other = await store.createAccount({ id: newIdAt(now), name: 'other', initialTokens: 1000, now });
  return { store, accountId: account.id, otherId: other.id };
}

const taskWith = (accountId: string, references: string[], now = new Date()) =>
  createTask({ model: 'alpha-pro', prompt: 'the same scene at night', image_reference: references }, { accountId, now, newId: () => newIdAt(now) });

const LIMITS = { maxActiveTasks: 100 };

t.test("a task whose references are the account's unexpired uploads is created and charged", async (t) => {
  const { store, accountId } = await openStore(t);
  const references = [(await storeUpload(store, accountId, new Date())).id, (await storeUpload(store, accountId, new Date())).id];
  const task = taskWith(accountId, references);
  await store.insertTaskWithDebit(task, LIMITS);
  t.strictSame((await store.getTask(accountId, task.id))?.imageReference, references);
  t.equal((await store.getAccount(accountId))?.balance, 1000 - task.cost);
});

t.test('a bad reference is refused, naming the first bad one, and nothing is stored or charged', async (t) => {
  const { store, accountId, otherId } = await openStore(t);
  const now = new Date();
  const good = (await storeUpload(store, accountId, now)).id;
  const bad: Record<string, string> = {
    unknown: newIdAt(now),
    "another account's upload": (await storeUpload(store, otherId, now)).id,
    'an upload expired when the task is made': (await storeUpload(store, accountId, new Date(now.getTime() - 7_200_000))).id,
  };
  for (const [name, id] of Object.entries(bad)) {
    const task = taskWith(accountId, [good, good, id, newIdAt(now)]);
    await t.rejects(
      store.insertTaskWithDebit(task, LIMITS),
      { code: 'invalid_media_reference', fieldErrors: [{ pointer: '/image_reference/2', location: 'body', code: 'unknown_media' }] },
      name,
    );
    t.equal(await store.getTask(accountId, task.id), null, `${name}: no task`);
  }
  t.equal((await store.getAccount(accountId))?.balance, 1000, 'nothing charged');
  // Had a refused task been counted as active, a cap of one would refuse this one.
  await store.insertTaskWithDebit(taskWith(accountId, [good]), { maxActiveTasks: 1 });
});

t.test('an upload deleted just before the create, in the same batch of writes, is refused', async (t) => {
  const { store, accountId } = await openStore(t);
  const now = new Date();
  const upload = (await storeUpload(store, accountId, now)).id;
  const task = taskWith(accountId, [upload]);
  const [deleted, created] = await Promise.allSettled([store.deleteMedia(accountId, upload, now), store.insertTaskWithDebit(task, LIMITS)]);
  t.equal(deleted.status, 'fulfilled');
  t.match(created, { status: 'rejected', reason: { code: 'invalid_media_reference' } });
  t.equal(await store.getTask(accountId, task.id), null);
  t.equal((await store.getAccount(accountId))?.balance, 1000);
});
