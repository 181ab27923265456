import t, { type Test } from 'tap';
import { encodeCursor } from '../../src/store/cursor.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/port.js';
import { postgresAtSchemaVersion, postgresTestUrl, reachable } from '../helpers/postgres.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';

/**
 * docs/design.md §3.8: ledger entry ids are UUIDv7. A database made by the release before (ids were the
 * entry's number in its account) keeps every entry, their order, and the cursors handed out then.
 */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** The entries of the previous release: account a has 3 grants, made a second apart. */
const T0 = Date.parse('2026-11-01T00:00:00Z');
/** The release before ledger UUIDs: the migrations before the one that adds them. */
const SQLITE_BEFORE = SQLITE_MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN entry_id'));
const POSTGRES_BEFORE = POSTGRES_MIGRATIONS.findIndex((m) => m.includes('ADD COLUMN entry_id'));

async function checkMigrated(t: Test, store: Store): Promise<void> {
  // A cursor the previous release handed out after the newest entry: the page after entry 3.
  const oldCursor = encodeCursor('3');
  const all = (await store.accounts.listLedger('a', { limit: 10 })).items;
  t.same(
    all.map((e) => [e.balanceAfter, e.createdAt.getTime()]),
    [
      [3, T0 + 2000],
      [2, T0 + 1000],
      [1, T0],
    ],
    'every entry kept, newest first',
  );
  t.ok(
    all.every((e) => UUID_V7.test(e.id)),
    `every id a UUIDv7: ${all.map((e) => e.id).join(', ')}`,
  );
  t.equal(new Set(all.map((e) => e.id)).size, 3);
  t.equal(all[2].id.replace(/-/g, '').slice(0, 12), T0.toString(16).padStart(12, '0'), "the id's time is created_at");
  t.same(
    (await store.accounts.listLedger('a', { limit: 10, cursor: oldCursor })).items.map((e) => e.balanceAfter),
    [2, 1],
    'a cursor handed out before the migration still pages on',
  );
  await store.accounts.grantTokens({ accountId: 'a', amount: 1, note: null, now: new Date(T0 + 3000) });
  const [newest] = (await store.accounts.listLedger('a', { limit: 1 })).items;
  t.match(newest, { balanceAfter: 4, id: UUID_V7 }, 'a new entry comes first, with a UUIDv7 of its own');
  t.notOk(
    all.some((e) => e.id === newest.id),
    'distinct',
  );
}

t.test('SQLite: the migration gives every ledger entry a UUIDv7, keeping order and cursors', async (t) => {
  const path = `${t.testdir({})}/imagegen.sqlite`;
  const old = openAtSchemaVersion(path, SQLITE_BEFORE);
  old.prepare("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 3, ?)").run(T0);
  const entry = old.prepare(
    "INSERT INTO ledger (account_id, account_seq, kind, amount, balance_after, created_at) VALUES ('a', ?, 'grant', 1, ?, ?)",
  );
  for (let i = 1; i <= 3; i++) entry.run(i, i, T0 + (i - 1) * 1000);
  old.close();

  const store = new SqliteStore(path);
  t.teardown(() => store.close());
  await store.migrate();
  await checkMigrated(t, store);
});

t.test(
  'PostgreSQL: the migration gives every ledger entry a UUIDv7, keeping order and cursors',
  { skip: !(await reachable()) && `no PostgreSQL at ${postgresTestUrl()}` },
  async (t) => {
    const { schema } = await postgresAtSchemaVersion(t, POSTGRES_BEFORE, async (client) => {
      await client.query("INSERT INTO accounts (id, name, balance, created_at) VALUES ('a', 'a', 3, $1)", [
        new Date(T0),
      ]);
      for (let i = 1; i <= 3; i++)
        await client.query(
          "INSERT INTO ledger (account_id, account_seq, kind, amount, balance_after, created_at) VALUES ('a', $1, 'grant', 1, $1, $2)",
          [i, new Date(T0 + (i - 1) * 1000)],
        );
    });
    const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 2 });
    t.teardown(() => store.close());
    await store.migrate();
    await checkMigrated(t, store);
  },
);
