import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import rootTest, { type Test } from 'tap';
import type { Redis } from 'ioredis';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { contractValidator } from './response-validation.js';
import type { BlobStore } from '../../src/blobs/port.js';
import { loadConfig, type Config } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { closeRateLimitCounters, openRateLimitCounters } from '../../src/runtime.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import type { Store } from '../../src/store/port.js';
import type { TaskEvents } from '../../src/services/task-events.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { testBlobAdapter, type BlobAdapterUnderTest } from './blobs.js';
import { testStoreAdapter, type StoreAdapterUnderTest } from './store.js';

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  /** The shared rate-limit counters opened for REDIS_URL (null without it); closed at teardown. */
  rateLimitRedis: Redis | null;
  config: Config;
  dataDir: string;
  /** The environment a child process (the CLI) needs to open the same store. */
  storeEnv: Record<string, string>;
  /** Another store on the same data, as a restarted process would open it. */
  reopenStore(): Promise<Store>;
  blobs: BlobStore;
  /** The environment a child process needs to open the same blobs (S3: endpoint, bucket, credentials). */
  blobEnv: Record<string, string>;
  /** Every blob key stored. */
  storedBlobKeys(): Promise<string[]>;
  /** A new account with `tokens` and its key. */
  newAccount(tokens?: number): Promise<{ accountId: string; key: string; auth: { authorization: string } }>;
}

/** Wraps app.inject so that an answer that breaks openapi.yaml rejects with what it breaks. */
function checkResponsesAgainstContract(app: FastifyInstance): void {
  const inject = app.inject.bind(app) as (options: InjectOptions) => Promise<LightMyRequestResponse>;
  const validator = contractValidator();
  app.inject = ((options: InjectOptions | string) => {
    const request = typeof options === 'string' ? { url: options } : options;
    return inject(request).then((response) => {
      const broken = validator.check(
        request.method ?? 'GET',
        String(request.url ?? request.path ?? ''),
        response.statusCode,
        response.headers['content-type'] as string | undefined,
        response.body,
      );
      if (broken) throw new Error(`response breaks openapi.yaml: ${broken}`);
      return response;
    });
  }) as FastifyInstance['inject'];
}

export const TEST_MEDIA_SIGNING_SECRET = 'test-signing-secret-0123456789abcdef';

/** One app on its own temp data dir (blobs under it too), closed when the test ends. */
export interface TestAppOptions {
  now?: () => Date;
  webhookLookup?: LookupAll;
  events?: TaskEvents;
  /** The store adapter; by default the one TEST_STORE names (SQLite). */
  storeAdapter?: StoreAdapterUnderTest;
  /** The blob adapter; by default the one TEST_BLOBS names (fs). */
  blobAdapter?: BlobAdapterUnderTest;
  /** Check every injected answer against openapi.yaml (response-validation.ts); default true. */
  validateResponses?: boolean;
  /** The built Playground to serve (scripts/build-pages.ts). */
  playgroundDir?: string;
  /** The built console to serve (scripts/build-pages.ts). */
  consoleDir?: string;
  /** The app's logger options (a test that reads the log lines); default none. */
  logger?: object;
}

export async function buildTestApp(
  t: Test,
  env: Record<string, string> = {},
  options: TestAppOptions = {},
): Promise<TestApp> {
  const dataDir = t.testdir({});
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', ...env });
  const {
    storeAdapter = testStoreAdapter(),
    blobAdapter = testBlobAdapter(),
    validateResponses = true,
    ...appOptions
  } = options;
  // The store's teardown, registered first, runs after the app's: tap runs teardowns last in, first out.
  const { store, env: storeEnv, reopen: reopenStore } = await storeAdapter.open(t, { dataDir });
  const { blobs, env: blobEnv, storedKeys: storedBlobKeys } = await blobAdapter.open(t, dataDir);
  // As a process opens them: shared counters when the test's environment names a Redis.
  // Registered before the app's teardown, so closed after it (tap runs teardowns last in, first out).
  const rateLimitRedis = await openRateLimitCounters(config, () => {});
  t.teardown(() => closeRateLimitCounters(rateLimitRedis));
  const app = await buildApp({
    config,
    store,
    blobs,
    mediaSigningSecret: TEST_MEDIA_SIGNING_SECRET,
    logger: false,
    ...appOptions,
    rateLimitRedis,
  });
  t.teardown(() => app.close());
  if (validateResponses) checkResponsesAgainstContract(app);
  return {
    app,
    store,
    rateLimitRedis,
    config,
    dataDir,
    storeEnv,
    reopenStore,
    blobs,
    blobEnv,
    storedBlobKeys,
    async newAccount(tokens = 10_000) {
      const { account, key } = await createAccountWithKey(store, { name: 'test', tokens, now: new Date() });
      return { accountId: account.id, key, auth: { authorization: `Bearer ${key}` } };
    },
  };
}

/**
 * The app of a whole test file (docs/design.md §6): built once before the file's first test and
 * closed after its last, on the root test's teardown. The file's tests isolate themselves by
 * account, key and ids (`newAccount`), not by app. Call at the top level of the file; the getter
 * answers once `t.before` has run, i.e. inside any test. A file may build several (a few
 * configurations for many tests): each has a data directory of its own.
 */
export function fileTestApp(env: Record<string, string> = {}, options: TestAppOptions = {}): () => TestApp {
  let built: TestApp | undefined;
  rootTest.before(async () => {
    built = await buildTestApp(rootTestWithOwnDirs(), env, options);
  });
  return () => {
    if (!built) throw new Error('fileTestApp: the app is built in t.before; read it inside a test');
    return built;
  };
}

/**
 * The root test as buildTestApp sees it, but handing out a directory of its own on each testdir():
 * tap's testdir() is one directory per test, emptied on every call, so two apps of one file built
 * on the root test would share (and wipe) one data directory.
 */
export function rootTestWithOwnDirs(): Test {
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
