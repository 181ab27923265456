import t from 'tap';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { type TaskSignal, TaskSignals } from '../../src/store/postgres/task-signals.js';
import { AwaitedList } from '../helpers/awaited-list.js';
import { postgresTestUrl, reachable, testSchema } from '../helpers/postgres.js';
import { claimNextTask } from '../helpers/store.js';

/**
 * What other processes hear of tasks on PostgreSQL (LISTEN/NOTIFY): a created or requeued task's
 * signal names its model, so that a worker claims only for the backends that run it; a signal
 * without one (a process of an earlier version) still parses, and wakes every backend.
 */

const skip = (await reachable()) ? false : `no PostgreSQL at ${postgresTestUrl()}`;

t.test("a payload carries its signal, with the created task's model when there is one", async (t) => {
  const signals: TaskSignal[] = [
    { kind: 'created', model: 'beta-v5-pro' },
    { kind: 'created' },
    { kind: 'changed', taskId: '01a222c5-b554-7171-9b8e-4bcdf4bcf84a' },
  ];
  for (const signal of signals) t.same(TaskSignals.parse(TaskSignals.payload(signal)), signal);
  t.same(TaskSignals.parse('c'), { kind: 'created' }, 'the bare "c" of an earlier version');
  t.equal(TaskSignals.parse('?'), null, 'a payload of no known kind is ignored');
  t.equal(TaskSignals.parse(undefined), null);
});

t.test("a create and a requeue signal their task's model", { skip }, async (t) => {
  const { schema } = await testSchema(t);
  const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
  t.teardown(() => store.close());
  await store.migrate();
  const created = new AwaitedList<TaskSignal>();
  const heard = created.items;
  const heardCount = (count: number) => created.reached(count);
  await store.listen((signal) => {
    if (signal.kind === 'created') created.push(signal);
  });

  const now = new Date();
  const account = await store.accounts.createAccount({ id: newIdAt(now), name: 'a', initialTokens: 1000, now });
  const task = createTask(
    { model: 'beta-v5-pro', prompt: 'a kite over dunes' },
    {
      accountId: account.id,
      now,
      newId: () => newIdAt(now),
    },
  );
  await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 10 });
  await heardCount(1);
  t.same(heard[0], { kind: 'created', model: 'beta-v5-pro' }, 'the create');

  const claimed = await claimNextTask(store.tasks, { now, leaseMs: 30_000, maxAttempts: 3, deadlineMs: 600_000 });
  t.equal(claimed?.id, task.id);
  t.ok(await store.tasks.requeueTask({ taskId: task.id, attempt: claimed!.attempt, runAfter: now, now }));
  await heardCount(2);
  t.same(heard[1], { kind: 'created', model: 'beta-v5-pro' }, 'the requeue');
});
