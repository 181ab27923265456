import t, { type Test } from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { createTask } from '../../src/core/task.js';
import { newIdAt } from '../../src/ids.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/port.js';
import { postgresAtSchemaVersion, postgresTestUrl, reachable } from '../helpers/postgres.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';

/**
 * Decision 0038: a budgeted key's spend per period moved from a sum over its tasks to a row of
 * key_spend. A store migrated with tasks of such keys admits exactly what the sum admitted: this
 * month's tasks count, last month's and the refunded ones do not, and a key without a budget has no row.
 */
const SQLITE_BEFORE = SQLITE_MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE key_spend'));
const POSTGRES_BEFORE = POSTGRES_MIGRATIONS.findIndex((m) => m.includes('CREATE TABLE key_spend'));
const NOW = new Date();
const THIS_MONTH = Date.UTC(NOW.getUTCFullYear(), NOW.getUTCMonth(), 1);
const LAST_MONTH = Date.UTC(NOW.getUTCFullYear(), NOW.getUTCMonth() - 1, 15);
const idAt = (ms: number) => newIdAt(new Date(ms));

/** Tasks of the budgeted key 'kb' (100 tokens a month) and of the plain key 'kp', 25 tokens each. */
const OLD_TASKS: [id: string, key: string, status: string, at: number][] = [
  [idAt(THIS_MONTH + 1000), 'kb', 'COMPLETED', THIS_MONTH + 1000],
  [idAt(THIS_MONTH + 2000), 'kb', 'CREATED', THIS_MONTH + 2000],
  [idAt(THIS_MONTH + 3000), 'kb', 'FAILED', THIS_MONTH + 3000],
  [idAt(LAST_MONTH), 'kb', 'COMPLETED', LAST_MONTH],
  [idAt(THIS_MONTH + 4000), 'kp', 'COMPLETED', THIS_MONTH + 4000],
];
const KEYS = [
  ['kb', 'igk_budget', 'hash-b', 100, 'month'],
  ['kp', 'igk_plain1', 'hash-p', null, null],
] as const;

async function checkSpend(t: Test, store: Store): Promise<void> {
  const key = await store.accounts.getApiKey('kb');
  t.same(key?.scope.tokenBudget, { tokens: 100, period: 'month' });
  const limits = { maxActiveTasks: 100, key: { id: 'kb', scope: key!.scope } };
  const task = () => {
    const now = new Date();
    return createTask({ model: 'alpha-pro', prompt: 'after' } as never, {
      accountId: 'a',
      now,
      newId: () => newIdAt(now),
      keyId: 'kb',
    });
  };
  // 50 of 100 spent this month: two more creates of 25 fit, a third does not.
  await store.tasks.insertTaskWithDebit(task(), limits);
  await store.tasks.insertTaskWithDebit(task(), limits);
  const refused = await store.tasks.insertTaskWithDebit(task(), limits).catch((e: unknown) => e);
  t.equal(refused instanceof DomainError && refused.code, 'key_budget_exhausted');
  // The created task of before the migration, canceled, gives its 25 back.
  await store.tasks.cancelTask('a', OLD_TASKS[1][0], new Date());
  await store.tasks.insertTaskWithDebit(task(), limits);
  t.equal(await store.accounts.keySpentSince('kb', new Date(THIS_MONTH)), 100);
  t.equal(await store.accounts.keySpentSince('kp', new Date(THIS_MONTH)), 25, 'the plain key, from its tasks');
}

t.test('SQLite: a budgeted key keeps its spend across the migration', async (t) => {
  const path = `${t.testdir({})}/imagegen.sqlite`;
  const old = openAtSchemaVersion(path, SQLITE_BEFORE);
  old.prepare("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 1000, ?)").run(LAST_MONTH);
  for (const [id, prefix, hash, tokens, period] of KEYS)
    old
      .prepare(
        `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, budget_tokens, budget_period)
         VALUES (?, 'a', ?, ?, ?, ?, ?, ?)`,
      )
      .run(id, id, prefix, hash, LAST_MONTH, tokens, period);
  for (const [id, key, status, at] of OLD_TASKS)
    old
      .prepare(
        `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
           cost, generated, created_at, key_id) VALUES (?, 'a', ?, 'alpha-pro', 'before', '[]', '1:1', '1K', 1024, 1024, 25, '[]', ?, ?)`,
      )
      .run(id, status, at, key);
  old.prepare("UPDATE accounts SET active_tasks = 1 WHERE id = 'a'").run();
  old.close();
  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  await store.migrate();
  await checkSpend(t, store);
});

t.test(
  'PostgreSQL: a budgeted key keeps its spend across the migration',
  { skip: !(await reachable()) && `no PostgreSQL at ${postgresTestUrl()}` },
  async (t) => {
    const { schema } = await postgresAtSchemaVersion(t, POSTGRES_BEFORE, async (client) => {
      await client.query("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 1000, $1)", [
        new Date(LAST_MONTH),
      ]);
      for (const [id, prefix, hash, tokens, period] of KEYS)
        await client.query(
          `INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, budget_tokens, budget_period)
           VALUES ($1, 'a', $1, $2, $3, $4, $5, $6)`,
          [id, prefix, hash, new Date(LAST_MONTH), tokens, period],
        );
      for (const [id, key, status, at] of OLD_TASKS)
        await client.query(
          `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width,
             height, cost, generated, created_at, run_after, key_id)
           VALUES ($1, 'a', $2, 'alpha-pro', 'before', '[]', '1:1', '1K', 1024, 1024, 25, '[]', $3, $3, $4)`,
          [id, status, new Date(at), key],
        );
    });
    const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
    t.teardown(() => store.close());
    await store.migrate();
    await checkSpend(t, store);
  },
);
