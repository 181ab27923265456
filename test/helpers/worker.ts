import type { Test } from 'tap';
import type { BlobStore } from '../../src/blobs/port.js';
import {
  GenerationError,
  type GenerationInput,
  type GeneratedImage,
  type ImageGenerator,
} from '../../src/generators/port.js';
import { LocalRenderer } from '../../src/generators/local-renderer.js';
import { newIdAt } from '../../src/ids.js';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { TaskEvents } from '../../src/services/task-events.js';
import type { Store } from '../../src/store/port.js';
import { TaskWorker, type TaskWorkerOptions } from '../../src/worker/task-worker.js';
import { testBlobAdapter } from './blobs.js';
import { testStoreAdapter } from './store.js';

/** A store and a blob store from the test factories (TEST_STORE, TEST_BLOBS), on the test's own temp dir. */
export async function openTestRuntime(t: Test) {
  const dir = t.testdir({});
  const { store, env: storeEnv } = await testStoreAdapter().open(t, { dataDir: dir });
  const { blobs, env: blobEnv, storedKeys: storedBlobKeys } = await testBlobAdapter().open(t, dir);
  return { dir, store, blobs, storeEnv, blobEnv, storedBlobKeys };
}

export async function newAccountWithTokens(store: Store, tokens: number): Promise<string> {
  const now = new Date();
  const account = await store.accounts.createAccount({
    id: newIdAt(now),
    name: 'worker-test',
    initialTokens: tokens,
    now,
  });
  return account.id;
}

export async function insertTask(store: Store, accountId: string, prompt = 'a quiet harbour'): Promise<TaskRecord> {
  const now = new Date();
  const task = createTask({ model: 'alpha-pro', prompt }, { accountId, now, newId: () => newIdAt(now) });
  await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 1000 });
  return task;
}

/** A fresh runtime with one account of 100 tokens and one queued task of cost 25. */
export async function oneQueuedTask(t: Test) {
  const deps = await openTestRuntime(t);
  const accountId = await newAccountWithTokens(deps.store, 100);
  const task = await insertTask(deps.store, accountId);
  return { deps, accountId, task };
}

export function testWorker(
  t: Test,
  deps: { store: Store; blobs: BlobStore },
  overrides: Partial<TaskWorkerOptions> & { generator?: ImageGenerator; concurrency?: number } = {},
): TaskWorker {
  const { generator = new LocalRenderer(), concurrency = 1, ...options } = overrides;
  const worker = new TaskWorker({
    store: deps.store,
    blobs: deps.blobs,
    // One backend serving every model, unless the test gives its own backends.
    backends: [{ name: generator.name, generator, slots: concurrency }],
    events: new TaskEvents(),
    leaseMs: 30_000,
    maxAttempts: 3,
    deadlineMs: 600_000,
    generationTimeoutMs: 60_000,
    retryBaseMs: 1,
    pollMs: 20,
    resultRetentionMs: 3600_000,
    random: () => 0.5,
    ...options,
  });
  t.teardown(() => worker.stop(0));
  return worker;
}

/** A generator scripted per call: each entry fails with the given error or renders for real. */
export class ScriptedGenerator implements ImageGenerator {
  readonly name = 'scripted';
  calls = 0;
  private readonly renderer = new LocalRenderer();

  constructor(private readonly script: (GenerationError | 'render')[]) {}

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    const step = this.script[Math.min(this.calls, this.script.length - 1)];
    this.calls++;
    if (step instanceof GenerationError) throw step;
    return this.renderer.generate(input, signal);
  }
}

/**
 * A generator that reports when it starts and then waits to be released (or aborted), so a test
 * can act while a task is IN_PROGRESS. With ignoreAbort it returns a result even after an abort,
 * the way a remote call that cannot be interrupted would.
 */
export class GatedGenerator implements ImageGenerator {
  readonly name = 'gated';
  readonly started: Promise<void>;
  private markStarted!: () => void;
  private release!: () => void;
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));

  constructor(private readonly options: { ignoreAbort?: boolean } = {}) {
    this.started = new Promise((resolve) => (this.markStarted = resolve));
  }

  open(): void {
    this.release();
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    this.markStarted();
    if (this.options.ignoreAbort) {
      await this.released;
    } else {
      await new Promise<void>((resolve, reject) => {
        void this.released.then(resolve);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    }
    return new LocalRenderer().generate(input, new AbortController().signal);
  }
}
