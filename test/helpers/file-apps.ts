import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import rootTest, { type Test } from 'tap';
import { buildTestApp, type TestApp, type TestAppOptions } from './app.js';
import { testStoreAdapter, type StoreAdapterUnderTest } from './store.js';

/**
 * The root test as buildTestApp sees it, but handing out a directory of its own on each testdir():
 * tap's testdir() is one directory per test, emptied on every call, so two apps of one file built
 * on the root test would share (and wipe) one data directory.
 */
function rootWithOwnDirs(): Test {
  return new Proxy(rootTest, {
    get(target, property) {
      if (property === 'testdir') {
        return () => {
          const dir = mkdtempSync(join(tmpdir(), 'imagegen-app-'));
          // Registered before the app's teardowns, so run after them (last in, first out).
          target.teardown(() => rmSync(dir, { recursive: true, force: true }));
          return dir;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Test;
}

/**
 * Another app of the file (docs/design.md §6), for a file whose tests need a few configurations:
 * as fileTestApp, built once before the file's first test and closed after its last, but on a data
 * directory of its own, so that any number of them (and one fileTestApp) live side by side.
 */
export function otherFileTestApp(env: Record<string, string> = {}, options: TestAppOptions = {}): () => TestApp {
  let built: TestApp | undefined;
  rootTest.before(async () => {
    built = await buildTestApp(rootWithOwnDirs(), env, options);
  });
  return () => {
    if (!built) throw new Error('otherFileTestApp: the app is built in t.before; read it inside a test');
    return built;
  };
}

/**
 * An app of the file built by the first test that asks for it, and closed after the file's last
 * test: for a configuration not every run needs (an app on another store adapter, which is skipped
 * where that store does not answer). Its data directory is its own.
 */
export function lazyFileTestApp(
  env: Record<string, string> = {},
  options: TestAppOptions = {},
): () => Promise<TestApp> {
  let building: Promise<TestApp> | undefined;
  return () => {
    building ??= buildTestApp(rootWithOwnDirs(), env, options);
    return building;
  };
}

/**
 * The app of a file for each store adapter of testOnEveryStore: the file's own app (`fileApp`,
 * built with the same env and options) on the adapter TEST_STORE names, and on any other adapter
 * an app built by the first test that runs there.
 */
export function everyStoreFileTestApp(
  fileApp: () => TestApp,
  env: Record<string, string> = {},
  options: TestAppOptions = {},
): (adapter: StoreAdapterUnderTest) => Promise<TestApp> {
  const others = new Map<string, () => Promise<TestApp>>();
  return async (adapter) => {
    if (adapter.kind === testStoreAdapter().kind) return fileApp();
    let other = others.get(adapter.kind);
    if (!other) {
      other = lazyFileTestApp(env, { ...options, storeAdapter: adapter });
      others.set(adapter.kind, other);
    }
    return other();
  };
}
