import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Test } from 'tap';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { OpenedTestStore } from './store.js';

/** The PostgreSQL the tests use (README, .ci/run starts it): the machine's, unless TEST_DATABASE_URL names another. */
export const postgresTestUrl = () => process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

let reachability: Promise<boolean> | null = null;

/** Errors that mean no server is there to test against (not a slow one, which must not skip tests). */
const ABSENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EADDRNOTAVAIL', '3D000', '28000', '28P01']);

/**
 * Whether a PostgreSQL answers at postgresTestUrl(), asked once per process. A server that is down
 * refuses at once; one that is merely slow (a loaded machine) is waited for, and an error other
 * than absence fails the test rather than skipping it.
 */
export function reachable(): Promise<boolean> {
  reachability ??= (async () => {
    const client = new pg.Client({ connectionString: postgresTestUrl(), connectionTimeoutMillis: 30_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch (error) {
      if (ABSENT.has((error as { code?: string }).code ?? '')) return false;
      throw error;
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return reachability;
}

/**
 * A schema of the test's own on the test database, dropped when the test ends, so that test files
 * (and tests) run in parallel on one server. Returns its name and a URL that selects it.
 */
export async function testSchema(t: Test): Promise<{ schema: string; url: string }> {
  const schema = `test_${randomBytes(8).toString('hex')}`;
  t.teardown(async () => {
    const admin = new pg.Client({ connectionString: postgresTestUrl() });
    await admin.connect();
    try {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await admin.end();
    }
  });
  const url = new URL(postgresTestUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  return { schema, url: url.toString() };
}

export async function openPostgresTestStore(t: Test): Promise<OpenedTestStore> {
  const { schema, url } = await testSchema(t);
  const openOne = async () => {
    const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: 5 });
    t.teardown(() => store.close());
    await store.migrate();
    return store;
  };
  return { store: await openOne(), reopen: openOne, env: { DATABASE_URL: url } };
}

/**
 * A PostgreSQL schema of the test's own as a release with `version` migrations left it, for tests
 * of the migrations after it: `seed` writes rows in that older shape, then PostgresStore migrates
 * the schema on (the caller opens it on the returned schema).
 */
export async function postgresAtSchemaVersion(
  t: Test,
  version: number,
  seed: (client: pg.Client) => Promise<void>,
): Promise<{ schema: string }> {
  const { POSTGRES_MIGRATIONS } = await import('../../src/store/postgres/migrations.js');
  const { schema } = await testSchema(t);
  const client = new pg.Client({ connectionString: postgresTestUrl() });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}; SET search_path = ${schema}`);
    await client.query(
      'CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (let done = 0; done < version; done++) {
      await client.query(POSTGRES_MIGRATIONS[done]);
      await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [done + 1]);
    }
    await seed(client);
  } finally {
    await client.end();
  }
  return { schema };
}
