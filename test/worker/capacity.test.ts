import t, { type Test } from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { CapacityProvider, type CapacityProviderOptions } from '../helpers/capacity-provider.js';
import { assertCapacityBounds, runCapacityScenario, type ScenarioAccount } from '../helpers/capacity-scenario.js';
import { freePort, startCli } from '../helpers/processes.js';
import { testStoreAdapter } from '../helpers/store.js';

/**
 * Decision 0016, what it must show: the real CLI `serve` with its defaults in front of a loopback provider of
 * fixed capacity C and latency L that refuses every call beyond C at once, as Gemini (429
 * RESOURCE_EXHAUSTED with RetryInfo) and as an OpenAI-compatible API (429 rate_limit_exceeded with
 * retry-after) do. 120 tasks: one account creates 96 at once, then three others 8 each. Every task
 * completes (none fails), at most 25 % of the provider's calls are refused, and the small accounts
 * are not queued behind the burst. How near the run comes to the provider's own limit N·L/C is
 * printed and judged by the bench (scenario capacity), not by a wall-clock bound here.
 * The store is TEST_STORE's (npm test runs this file on SQLite and again on PostgreSQL).
 */

// The three scenarios at once, each with its provider and `serve` of its own: they wait on the
// provider's latency and RetryInfo far more than they compute, and what they assert is counts and
// order (never wall-clock bounds), which load does not change. One after another they took 30 s.
t.jobs = 3;

const CAPACITY = 6;
const LATENCY_MS = 400;
const BURST_TASKS = 96;
const SMALL_TASKS = 8;
const TASKS = BURST_TASKS + 3 * SMALL_TASKS;
const PRICE = 25; // alpha-pro at 1K

/**
 * `serve` on a store of the test's own (TEST_STORE's adapter), listening on a free port, with `env`
 * over its defaults; the accounts are made in the store first, as `keys create` makes them
 * (a CLI process each would add seconds per account on a loaded machine).
 */
async function startServe(t: Test, env: Record<string, string>, accounts: { name: string; tokens: number }[]) {
  const dataDir = t.testdir({});
  const { store, env: storeEnv } = await testStoreAdapter().open(t, { dataDir });
  const keys: string[] = [];
  for (const { name, tokens } of accounts)
    keys.push((await createAccountWithKey(store, { name, tokens, now: new Date() })).key);
  const port = await freePort();
  const serve = startCli(t, ['serve'], {
    DATA_DIR: dataDir,
    ...storeEnv,
    ...env,
    PORT: String(port),
    HOST: '127.0.0.1',
  });
  await serve.printed('"msg":"ready"');
  return { url: `http://127.0.0.1:${port}`, keys };
}

async function startProvider(t: Test, options: CapacityProviderOptions): Promise<CapacityProvider> {
  const provider = await CapacityProvider.start(options);
  t.teardown(() => provider.close());
  return provider;
}

const BACKENDS = {
  'Gemini (429 RESOURCE_EXHAUSTED, RetryInfo 1s)': (url: string) => ({
    ALPHA_PRO_BACKEND: 'gemini',
    GEMINI_API_KEY: 'test',
    GEMINI_BASE_URL: url,
  }),
  'an OpenAI-compatible API (429 rate_limit_exceeded, retry-after 1)': (url: string) => ({
    ALPHA_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'test',
    OPENAI_BASE_URL: `${url}/v1`,
    OPENAI_IMAGE_MODEL: 'gpt-image-1',
  }),
};

for (const [name, backendEnv] of Object.entries(BACKENDS)) {
  t.test(
    `${name}, C = ${CAPACITY}, L = ${LATENCY_MS} ms: ${TASKS} tasks from 4 accounts on serve with defaults all complete near the provider's limit, fairly`,
    async (t) => {
      const provider = await startProvider(t, { capacity: CAPACITY, latencyMs: LATENCY_MS, retryDelay: 1 });
      // Defaults for everything that decides capacity; only the cap on one account's active tasks is
      // raised, so that the burst of 96 is accepted whole.
      const { url, keys } = await startServe(t, { ...backendEnv(provider.url), MAX_ACTIVE_TASKS: '1000' }, [
        { name: 'A', tokens: BURST_TASKS * PRICE },
        ...['B', 'C', 'D'].map((name) => ({ name, tokens: SMALL_TASKS * PRICE })),
      ]);
      const burst: ScenarioAccount = { name: 'A', key: keys[0], tasks: BURST_TASKS };
      const small = ['B', 'C', 'D'].map((name, i) => ({ name, key: keys[i + 1], tasks: SMALL_TASKS }));

      const run = await runCapacityScenario({
        apiUrls: [url],
        burst,
        small,
        // 1:1 at 1K: 1024×1024, a size both providers take as it is.
        body: { model: 'alpha-pro', parameters: { aspect_ratio: '1:1', resolution: '1K' } },
        // 5 × the bound: today's code takes about 30 s here; the file stays within tap's 300 s.
        giveUpAfterMs: 60_000,
      });
      assertCapacityBounds(t, run, provider, 'A');
    },
  );
}

t.test(
  'a provider that refuses every call past the deadline: that task fails deadline_exceeded, refunded once; nothing else fails',
  async (t) => {
    const DEADLINE_MS = 6000;
    const provider = await startProvider(t, { capacity: 0, latencyMs: 100, retryDelay: 1 });
    const { url, keys } = await startServe(
      t,
      {
        ALPHA_PRO_BACKEND: 'gemini',
        GEMINI_API_KEY: 'test',
        GEMINI_BASE_URL: provider.url,
        // beta-v5-pro stays on the local renderer: its tasks must not be held back by the other backend.
        TASK_DEADLINE_MS: String(DEADLINE_MS),
        // A short backoff of the service's own: TASK_MAX_ATTEMPTS (3) rate-limited attempts would be
        // spent within about 3 s (each 1 s apart, as RetryInfo asks), well before the deadline, if a
        // capacity refusal used one.
        GENERATION_RETRY_BASE_MS: '100',
      },
      [{ name: 'A', tokens: 3 * PRICE }],
    );
    const [key] = keys;
    // Both at once: the local renderer's tasks run while the other backend refuses.
    const [run, local] = await Promise.all(
      [
        { name: 'A', tasks: 1, body: { model: 'alpha-pro' } },
        { name: 'A-local', tasks: 2, body: { model: 'beta-v5-pro' } },
      ].map(({ name, tasks, body }) =>
        runCapacityScenario({ apiUrls: [url], burst: { name, key, tasks }, small: [], body, giveUpAfterMs: 30_000 }),
      ),
    );
    const [refused] = run.tasks;
    t.comment(
      `provider refused ${provider.rateLimited} calls; task ended ${refused.completedAt! - refused.sentAt} ms after its create`,
    );
    t.equal(refused.status, 'FAILED');
    t.equal(refused.errorCode, 'deadline_exceeded', 'failed at its deadline, not for running out of attempts');
    // Failed once the provider's wait (RetryInfo 1 s) would run past the deadline (decision 0011), not earlier.
    t.ok(refused.completedAt! - refused.sentAt >= DEADLINE_MS - 1000 - 50, 'not before its deadline was in sight');
    t.ok(provider.rateLimited >= 1, 'the provider was asked and refused');
    t.same(
      local.tasks.map((task) => task.status),
      ['COMPLETED', 'COMPLETED'],
      'the tasks of another backend completed',
    );

    const ledger = await fetch(`${url}/api/v1/account/ledger?limit=100`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const entries = ((await ledger.json()) as { data: { kind: string; amount: number; task_id: string | null }[] })
      .data;
    const of = (taskId: string) => entries.filter((e) => e.task_id === taskId).map((e) => `${e.kind} ${e.amount}`);
    t.same(of(refused.taskId).sort(), ['debit 25', 'refund 25'], 'the failed task: debited once, refunded once');
    for (const task of local.tasks) t.same(of(task.taskId), ['debit 25'], 'a completed task: debited, not refunded');
  },
);
