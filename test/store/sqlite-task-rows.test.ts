import Database from 'better-sqlite3';
import t from 'tap';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { storeUpload } from '../helpers/uploads.js';
import { TASK_COLUMNS, toTask, type TaskRow } from '../../src/store/sqlite/rows.js';

/**
 * The SQLite store reads tasks in raw mode (arrays) and names the columns itself (TASK_COLUMNS,
 * taskRowOf); these pin that mapping to the table, so that a new or reordered column cannot shift
 * every field after it.
 */

t.test("TASK_COLUMNS are the tasks table's columns, in order, but for the queue's own two", async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  t.strictSame(
    db.prepare('SELECT * FROM tasks').columns().map((c) => c.name).filter((name) => name !== 'lease_expires_at' && name !== 'run_after'),
    [...TASK_COLUMNS],
  );
});

t.test('tasks read by the store equal the rows read by name, every field set', async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  const now = new Date();
  const account = await store.createAccount({ id: newIdAt(now), name: 'rows', initialTokens: 1000, now });
  const references = [(await storeUpload(store, account.id, now)).id, (await storeUpload(store, account.id, now)).id];
  const request = {
    model: 'alpha-pro' as const,
    // Every kind of character JSON escapes or that takes more than one byte, so that the JSON the
    // store reads a task as gives back the same text.
    prompt: 'a "lighthouse" at dawn \\ \n\t\u0001 ﬁ 灯台 🌅 \u2028 end',
    image_reference: references,
    parameters: { aspect_ratio: '21:9' as const, resolution: '4K' as const },
    webhook_url: 'https://example.com/hook?a="b"&c=\\d',
  };
  const task = createTask(request, { accountId: account.id, now, newId: () => newIdAt(now) });
  await store.insertTaskWithDebit(task, { maxActiveTasks: 10 });
  const claimed = await store.claimNextTask({ now, leaseMs: 60_000, maxAttempts: 3, deadlineMs: 3_600_000 });
  t.equal(claimed?.id, task.id);
  t.ok(await store.failTask({ taskId: task.id, attempt: 1, error: { code: 'content_rejected', message: 'no: "quoted" \\ 🌅' }, now }));

  const db = new Database(path, { readonly: true });
  t.teardown(() => db.close());
  const byName = toTask(db.prepare('SELECT * FROM tasks WHERE id = ?').get(task.id) as TaskRow);
  t.match(byName, { status: 'FAILED', prompt: request.prompt, webhookUrl: request.webhook_url, error: { code: 'content_rejected' }, attempt: 1, startedAt: Date, completedAt: Date });
  t.strictSame(await store.getTask(account.id, task.id), byName, 'getTask');
  t.strictSame(await store.getTaskById(task.id), byName, 'getTaskById');
  t.strictSame((await store.listTasks(account.id, { limit: 10 })).items, [byName], 'listTasks');
});
