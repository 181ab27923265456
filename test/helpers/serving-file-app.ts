import rootTest from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { workerBackends } from '../../src/worker/build-worker.js';
import { fileTestApp, type TestApp, type TestAppOptions } from './app.js';
import { freePort } from './processes.js';
import { testWorker } from './worker.js';

/**
 * The app of a whole file listening on a loopback port, with an in-process worker finishing its
 * tasks: for files whose tests speak to it through a client of another ecosystem (the openai SDK,
 * the MCP SDK), which needs a socket and finished images. Call at the top level of the file.
 */
export async function servingFileTestApp(
  env: Record<string, string> = {},
  options: Omit<TestAppOptions, 'events'> = {},
): Promise<{ fileApp: () => TestApp; port: number; base: string }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const events = new TaskEvents();
  const fileApp = fileTestApp({ PUBLIC_BASE_URL: base, ...env }, { ...options, events });
  rootTest.before(async () => {
    const harness = fileApp();
    testWorker(rootTest, harness, {
      events,
      backends: workerBackends(harness.config, 2),
      generationTimeoutMs: harness.config.GENERATION_TIMEOUT_MS,
      maxAttempts: harness.config.TASK_MAX_ATTEMPTS,
    }).start();
    await harness.app.listen({ host: '127.0.0.1', port });
  });
  return { fileApp, port, base };
}
