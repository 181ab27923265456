import { buildTestApp, rootTestWithOwnDirs, type TestApp, type TestAppOptions } from './app.js';
import { testStoreAdapter, type StoreAdapterUnderTest } from './store.js';

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
    building ??= buildTestApp(rootTestWithOwnDirs(), env, options);
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
