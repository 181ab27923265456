import t from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { CapacityProvider } from '../helpers/capacity-provider.js';
import { assertCapacityBounds, runCapacityScenario } from '../helpers/capacity-scenario.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

/**
 * Decision 0016, what it must show, in a cluster: the capacity scenario of test/worker/capacity.test.ts (Gemini's
 * 429 RESOURCE_EXHAUSTED with RetryInfo, C = 6, L = 400 ms, 120 tasks: 96 from one account at once,
 * then 8 from each of three others) against an API-only `serve` and 2 `worker` processes on one
 * PostgreSQL, all with their defaults. Together the workers must keep to the provider's limit (the
 * 429 share), complete every task and serve the small accounts in turn; the makespan against N·L/C
 * is printed and judged by the bench.
 */

const CAPACITY = 6;
const LATENCY_MS = 400;
const BURST_TASKS = 96;
const SMALL_TASKS = 8;
const TASKS = BURST_TASKS + 3 * SMALL_TASKS;
const PRICE = 25;

t.test(
  `${TASKS} tasks from 4 accounts through serve (API only) and 2 worker processes on PostgreSQL, C = ${CAPACITY}, L = ${LATENCY_MS} ms: all complete near the provider's limit, fairly`,
  await needsStore('postgres'),
  async (t) => {
    const provider = await CapacityProvider.start({ capacity: CAPACITY, latencyMs: LATENCY_MS, retryDelay: 1 });
    t.teardown(() => provider.close());
    const { url, store } = await clusterDatabase(t);
    const now = new Date();
    const key = async (name: string, tasks: number) =>
      (await createAccountWithKey(store, { name, tokens: tasks * PRICE, now })).key;

    // Defaults for everything that decides capacity; only the cap on one account's active tasks is
    // raised, so that the burst of 96 is accepted whole.
    const shared = {
      DATABASE_URL: url,
      DATA_DIR: t.testdir({}),
      ALPHA_PRO_BACKEND: 'gemini',
      GEMINI_API_KEY: 'test',
      GEMINI_BASE_URL: provider.url,
      MAX_ACTIVE_TASKS: '1000',
    };
    const port = await freePort();
    const api = startCli(t, ['serve'], { ...shared, WORKER_CONCURRENCY: '0', PORT: String(port), HOST: '127.0.0.1' });
    const workers = [1, 2].map(() => startCli(t, ['worker'], shared));
    await Promise.all([api.printed('"msg":"ready"'), ...workers.map((w) => w.printed('"msg":"worker started"'))]);

    const run = await runCapacityScenario({
      apiUrls: [`http://127.0.0.1:${port}`],
      burst: { name: 'A', key: await key('A', BURST_TASKS), tasks: BURST_TASKS },
      small: await Promise.all(
        ['B', 'C', 'D'].map(async (name) => ({ name, key: await key(name, SMALL_TASKS), tasks: SMALL_TASKS })),
      ),
      body: { model: 'alpha-pro', parameters: { aspect_ratio: '1:1', resolution: '1K' } },
      giveUpAfterMs: 120_000,
    });
    assertCapacityBounds(t, run, provider, 'A');
  },
);
