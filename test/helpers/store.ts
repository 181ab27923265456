import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { TaskRecord } from '../../src/core/task.js';
import type { ClaimPolicy, Store, TaskExecutionStore } from '../../src/store/port.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { openPostgresTestStore, postgresTestUrl, reachable } from './postgres.js';

/**
 * Where tests get their store: the contract suite runs over every adapter below, and the HTTP
 * tests take theirs from here too (TEST_STORE=postgres runs them on PostgreSQL), so that no test
 * but a SQLite-specific one constructs an adapter itself.
 */
export type StoreKind = 'sqlite' | 'postgres';

export interface OpenedTestStore {
  store: Store;
  /** Another store on the same data, as a second process or a restart would open it; closed with the test. */
  reopen(): Promise<Store>;
  /** The environment a child process (the CLI) needs to open the same store. */
  env: Record<string, string>;
}

export interface StoreAdapterUnderTest {
  kind: StoreKind;
  /**
   * A new, empty, migrated store of the test's own (temp dir or schema), closed and removed when t
   * ends. SQLite puts its file where the CLI looks for it in dataDir, when given.
   */
  open(t: Test, options?: { dataDir?: string }): Promise<OpenedTestStore>;
}

const sqlite: StoreAdapterUnderTest = {
  kind: 'sqlite',
  async open(t, options = {}) {
    // Without dataDir, a directory of its own, not t.testdir(): a test may call that for its blobs, which empties it.
    let dir = options.dataDir;
    if (!dir) {
      const own = mkdtempSync(join(tmpdir(), 'imagegen-store-'));
      t.teardown(() => rmSync(own, { recursive: true, force: true }));
      dir = own;
    }
    const path = join(dir, 'imagegen.sqlite');
    const openOne = async () => {
      const store = new SqliteStore(path);
      await store.migrate();
      t.teardown(() => store.close());
      return store;
    };
    return { store: await openOne(), reopen: openOne, env: { DATA_DIR: dir } };
  },
};

const postgres: StoreAdapterUnderTest = { kind: 'postgres', open: (t) => openPostgresTestStore(t) };

export const STORE_ADAPTERS: readonly StoreAdapterUnderTest[] = [sqlite, postgres];

/** The adapter named by TEST_STORE (default sqlite), for the tests that run on one adapter at a time. */
export function testStoreAdapter(kind = (process.env.TEST_STORE ?? 'sqlite') as StoreKind): StoreAdapterUnderTest {
  const adapter = STORE_ADAPTERS.find((a) => a.kind === kind);
  if (!adapter) throw new Error(`TEST_STORE=${kind}: expected sqlite or postgres`);
  return adapter;
}

/** tap options for a test on `kind`: skipped, with the reason, where no PostgreSQL answers (.ci/run starts one). */
export async function needsStore(kind: StoreKind): Promise<{ skip: string | false }> {
  if (kind === 'sqlite') return { skip: false };
  return (await reachable()) ? { skip: false } : { skip: `no PostgreSQL at ${postgresTestUrl()}` };
}

/**
 * A test run once on every store adapter, as subtests named by the adapter (PostgreSQL skipped
 * where none answers): for the HTTP tests of money and races, which must hold on every store. In
 * the PostgreSQL pass of `npm test` (TEST_PASS=postgres, scripts/tap-passes.ts) it is skipped,
 * saying so: the first pass ran it on every store.
 */
export function testOnEveryStore(
  t: Test,
  name: string,
  fn: (t: Test, storeAdapter: StoreAdapterUnderTest) => Promise<void>,
): void {
  if (process.env.TEST_PASS === 'postgres') {
    t.test(name, { skip: 'ran on every store in the first pass of npm test' }, async () => {});
    return;
  }
  t.test(name, async (t) => {
    for (const adapter of STORE_ADAPTERS) t.test(adapter.kind, await needsStore(adapter.kind), (t) => fn(t, adapter));
  });
}

/** A claim of one task, as the tests make it (the worker claims for its free slots: claimTasks). */
export async function claimNextTask(
  tasks: Pick<TaskExecutionStore, 'claimTasks'>,
  policy: ClaimPolicy,
): Promise<TaskRecord | null> {
  return (await tasks.claimTasks(policy, 1))[0] ?? null;
}
