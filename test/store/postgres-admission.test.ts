import pg from 'pg';
import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { TASK_COLUMNS, taskValues } from '../../src/store/postgres/rows.js';
import { postgresTestUrl, reachable, testSchema } from '../helpers/postgres.js';

/**
 * The PostgreSQL admission reads the account in one round trip (the migration's
 * `admitting_account`: the account's row locked, then its active tasks counted). Under READ
 * COMMITTED a single statement would count in a snapshot taken before it waited for the lock; the
 * function's count must see what the admission that held the lock committed. Here a client of the
 * test plays that admission, holding the lock while it adds a task, so the order is certain.
 */

const skip = (await reachable()) ? false : `no PostgreSQL at ${postgresTestUrl()}`;

function newTask(accountId: string): TaskRecord {
  const now = new Date();
  return createTask({ model: 'alpha-pro', prompt: 'a lighthouse at dawn', parameters: {} } as never, {
    accountId,
    now,
    newId: () => newIdAt(now),
  });
}

t.test(
  'an admission that waited for the account lock counts the task the lock holder admitted',
  { skip },
  async (t) => {
    const { schema } = await testSchema(t);
    const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
    t.teardown(() => store.close());
    await store.migrate();
    const now = new Date();
    const account = await store.accounts.createAccount({ id: newIdAt(now), name: 'a', initialTokens: 100, now });

    const holder = new pg.Client({ connectionString: postgresTestUrl(), options: `-c search_path=${schema}` });
    await holder.connect();
    t.teardown(() => holder.end());
    await holder.query('BEGIN');
    await holder.query('SELECT balance FROM accounts WHERE id = $1 FOR UPDATE', [account.id]);

    // Its outcome is taken at once: the refusal comes while the holder's COMMIT is still answering.
    const refused = store.tasks.insertTaskWithDebit(newTask(account.id), { maxActiveTasks: 1 }).then(
      () => null,
      (error: unknown) => error,
    );
    // Until the store's admission waits for the row the holder locked. Asked from a connection
    // outside the holder's transaction: within one, pg_stat_activity is read once and kept.
    const observer = new pg.Client({ connectionString: postgresTestUrl() });
    await observer.connect();
    t.teardown(() => observer.end());
    for (;;) {
      const { rows } = await observer.query<{ waiting: number }>(
        `SELECT count(*)::int AS waiting FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE '%admitting_account%' AND datname = current_database()`,
      );
      if (rows[0].waiting > 0) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const admitted = newTask(account.id);
    const values = taskValues(admitted);
    await holder.query(
      `INSERT INTO tasks (${TASK_COLUMNS}, run_after) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}, $${values.length + 1})`,
      [...values, admitted.createdAt],
    );
    await holder.query('UPDATE accounts SET balance = balance - $1 WHERE id = $2', [admitted.cost, account.id]);
    await holder.query('COMMIT');

    const refusal = await refused;
    t.ok(refusal instanceof DomainError, 'refused');
    t.match(refusal, { code: 'too_many_active_tasks' }, 'the holder’s task was counted');
    t.equal((await store.accounts.getAccount(account.id))!.balance, 100 - admitted.cost, 'nothing debited');
  },
);
