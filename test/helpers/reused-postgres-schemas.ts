import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Test } from 'tap';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { postgresTestUrl } from './postgres.js';
import type { StoreAdapterUnderTest } from './store.js';

/**
 * The PostgreSQL adapter for a file of many tests that each need an empty store of their own (the
 * store contract): migrating a new schema takes about a second, emptying a migrated one a few ms.
 * Each test gets a schema that no running test holds, emptied as a new one is (every table but
 * schema_migrations truncated, identities restarted), and gives it back when it ends; the file's
 * schemas are dropped when the file ends. As many schemas are made as tests run at once.
 */
export function reusedPostgresSchemas(file: Test): StoreAdapterUnderTest {
  const admin = new pg.Pool({ connectionString: postgresTestUrl(), max: 2 });
  const made: string[] = [];
  const free: string[] = [];
  file.teardown(async () => {
    try {
      for (const schema of made) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await admin.end();
    }
  });

  async function empty(schema: string): Promise<void> {
    const { rows } = await admin.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_migrations'",
      [schema],
    );
    if (rows.length === 0) return;
    const tables = rows.map((row) => `${schema}."${row.tablename}"`).join(', ');
    // The audit log refuses TRUNCATE by a trigger (it is append-only for the service); a test's
    // leftovers are emptied with the triggers off, as a restore would.
    await admin.query(
      `BEGIN; SET LOCAL session_replication_role = replica; TRUNCATE ${tables} RESTART IDENTITY CASCADE; COMMIT`,
    );
  }

  return {
    kind: 'postgres',
    async open(t) {
      let schema = free.pop();
      if (schema) await empty(schema);
      else {
        schema = `test_${randomBytes(8).toString('hex')}`;
        made.push(schema);
      }
      const taken = schema;
      const stores: PostgresStore[] = [];
      const openOne = async () => {
        const store = new PostgresStore({ connectionString: postgresTestUrl(), schema: taken, poolSize: 5 });
        stores.push(store);
        await store.migrate();
        return store;
      };
      t.teardown(async () => {
        await Promise.all(stores.map((store) => store.close()));
        free.push(taken);
      });
      const url = new URL(postgresTestUrl());
      url.searchParams.set('options', `-c search_path=${taken}`);
      return { store: await openOne(), reopen: openOne, env: { DATABASE_URL: url.toString() } };
    },
  };
}
