import { once } from 'node:events';
import t, { type Test } from 'tap';
import { Registry } from 'prom-client';
import { buildWorkerMetricsApp } from '../../src/http/worker-metrics-app.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { FakeUpstream, pngBase64 } from '../helpers/fake-upstream.js';
import { openAiReply } from '../helpers/provider-replies.js';
import { clusterDatabase, freePort, startCli, type CliProcess } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

/**
 * The drain on SIGTERM (docs/design.md §4.4) of real CLI processes on one PostgreSQL: an `api`
 * answers every open long-poll and event stream and exits within SHUTDOWN_GRACE_MS; a `worker`
 * lets a running generation finish within the grace, or releases it so that the other worker takes
 * it at once (woken by NOTIFY, not by its poll or the lease's expiry). test/deploy runs the same
 * drains in containers.
 */

const LONG_POLLS = 100;
const STREAMS = 20;

interface TaskBody {
  data: { task_id: string; status: string; cost: number; attempt?: number };
}

async function exitOf(child: CliProcess): Promise<{ code: number | null; at: number }> {
  if (child.exitCode !== null) return { code: child.exitCode, at: Date.now() };
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, at: Date.now() };
}

t.test(
  `an api with ${LONG_POLLS} long-polls and ${STREAMS} event streams open drains on SIGTERM: 503 at once, every one answered, exit 0 within the grace`,
  await needsStore('postgres'),
  async (t) => {
    const { url, store } = await clusterDatabase(t);
    const { key } = await createAccountWithKey(store, { name: 'drain', tokens: 10_000, now: new Date() });
    const port = await freePort();
    const graceMs = 8000;
    const delayMs = 600;
    const api = startCli(t, ['api'], {
      DATABASE_URL: url,
      DATA_DIR: t.testdir({}),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: String(graceMs),
      SHUTDOWN_DELAY_MS: String(delayMs),
      RATE_LIMIT_REQUESTS_PER_MIN: '100000',
    });
    await api.printed('"msg":"ready"');
    const base = `http://127.0.0.1:${port}`;
    const auth = { authorization: `Bearer ${key}` };

    // No worker runs: every task stays CREATED, so every wait is held until the drain answers it.
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const response = await fetch(`${base}/api/v1/images/generations`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'alpha-pro', prompt: `drain ${i}` }),
      });
      t.equal(response.status, 202);
      ids.push(((await response.json()) as TaskBody).data.task_id);
    }
    const polls = Array.from({ length: LONG_POLLS }, (_, i) =>
      fetch(`${base}/api/v1/images/generations/${ids[i % ids.length]}?wait=60`, { headers: auth }).then(
        async (response) => ({ status: response.status, body: (await response.json()) as TaskBody, at: Date.now() }),
        (error: unknown) => ({ status: 0, error, at: Date.now() }),
      ),
    );
    const streams = Array.from({ length: STREAMS }, (_, i) =>
      fetch(`${base}/api/v1/images/generations/${ids[i % ids.length]}/events`, {
        headers: { ...auth, accept: 'text/event-stream' },
      }).then(
        async (response) => ({ status: response.status, text: await response.text(), at: Date.now() }),
        (error: unknown) => ({ status: 0, text: String(error), at: Date.now() }),
      ),
    );
    // Every wait is held (the api's own gauge) before the signal.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const metrics = await (await fetch(`${base}/metrics`)).text();
      const held = Number(/^imagegen_task_waits (\d+)/m.exec(metrics)?.[1] ?? 0);
      if (held >= LONG_POLLS + STREAMS) break;
      if (Date.now() > deadline) t.fail(`only ${held} waits held`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    const signalledAt = Date.now();
    api.kill('SIGTERM');
    const exited = exitOf(api);
    // Readiness turns at once; the api still serves meanwhile, for load balancers to take it out.
    let ready = await fetch(`${base}/readyz`);
    for (let i = 0; i < 20 && ready.status !== 503; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      ready = await fetch(`${base}/readyz`);
    }
    t.equal(ready.status, 503, '/readyz is 503 once draining');
    t.ok(Date.now() - signalledAt < delayMs, `503 within ${Date.now() - signalledAt} ms, before the delay is over`);
    t.equal((await fetch(`${base}/api/v1/images/generations/${ids[0]}`, { headers: auth })).status, 200);

    const answered = await Promise.all(polls);
    const ended = await Promise.all(streams);
    const { code, at } = await exited;
    t.equal(code, 0, 'the api exits 0');
    t.ok(at - signalledAt < graceMs, `exited ${at - signalledAt} ms after SIGTERM, within ${graceMs} ms`);
    const okPolls = answered.filter((r) => r.status === 200 && 'body' in r && r.body.data.status === 'CREATED');
    t.equal(okPolls.length, LONG_POLLS, 'every long-poll answered 200 with its task as it is');
    t.ok(
      answered.every((r) => r.at - signalledAt >= delayMs - 50),
      'long-polls answered once the delay is over, not before',
    );
    const reconnects = ended.filter(
      (r) => r.status === 200 && /event: reconnect\ndata: \{"reason":"shutdown"\}/.test(r.text),
    );
    t.equal(reconnects.length, STREAMS, 'every event stream ended with a reconnect event');
    const output = await api.output;
    t.match(output, /"msg":"draining"/);
    t.match(output, /"msg":"drained"/);
    t.notMatch(output, /cutting the requests/);
    t.comment(
      `drain: ${okPolls.length}/${LONG_POLLS} long-polls and ${reconnects.length}/${STREAMS} streams answered; exit ${at - signalledAt} ms after SIGTERM`,
    );
  },
);

/** Two workers on the openai backend, served by a fake provider whose replies the test holds. */
async function workersCluster(t: Test, graceMs: number) {
  const { url, store } = await clusterDatabase(t);
  const { account, key } = await createAccountWithKey(store, { name: 'drain', tokens: 1000, now: new Date() });
  const upstream = await FakeUpstream.start(t);
  const image = openAiReply.image(await pngBase64(1024, 1024));
  const env = {
    DATABASE_URL: url,
    DATA_DIR: t.testdir({}),
    LOG_LEVEL: 'info',
    ALPHA_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'sk-drain',
    OPENAI_BASE_URL: `${upstream.url}/v1`,
    OPENAI_IMAGE_MODEL: 'gpt-image-2',
    SHUTDOWN_GRACE_MS: String(graceMs),
    // Only a NOTIFY wakes an idle worker within the test; the lease expires long after it.
    WORKER_POLL_MS: '60000',
    TASK_LEASE_MS: '60000',
    WORKER_METRICS_PORT: '0',
  };
  const port = await freePort();
  const api = startCli(t, ['api'], { ...env, PORT: String(port), HOST: '127.0.0.1' });
  await api.printed('"msg":"ready"');
  const first = startCli(t, ['worker'], env);
  await first.printed('"msg":"worker started"');
  const create = async () => {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-pro', prompt: 'a slow lighthouse' }),
    });
    return ((await response.json()) as TaskBody).data;
  };
  return { store, account, upstream, image, env, first, create };
}

t.test(
  'a worker SIGTERMed mid-generation lets it finish within the grace, then exits 0',
  await needsStore('postgres'),
  async (t) => {
    const { store, account, upstream, image, first, create } = await workersCluster(t, 10_000);
    upstream.replyWith({ hang: true });
    const task = await create();
    await upstream.received(1);
    first.kill('SIGTERM');
    await first.printed('"msg":"worker draining"');
    await new Promise((resolve) => setTimeout(resolve, 500));
    upstream.release(image);
    const { code } = await exitOf(first);
    t.equal(code, 0);
    const done = await store.tasks.getTask(account.id, task.task_id);
    t.equal(done?.status, 'COMPLETED', 'the task finished in the worker that had it');
    t.equal(upstream.requests.length, 1, 'one generation');
    t.equal((await store.accounts.getAccount(account.id))?.balance, 1000 - task.cost, 'charged once');
    t.notMatch(await first.output, /task released at shutdown/);
  },
);

t.test(
  'a worker SIGTERMed with a generation longer than its grace releases it: the other worker takes it at once',
  await needsStore('postgres'),
  async (t) => {
    const graceMs = 2000;
    const { store, account, upstream, image, env, first, create } = await workersCluster(t, graceMs);
    upstream.replyWith({ hang: true }, image);
    const task = await create();
    await upstream.received(1);
    const second = startCli(t, ['worker'], env);
    await second.printed('"msg":"worker started"');

    const signalledAt = Date.now();
    first.kill('SIGTERM');
    const abandonedAt = upstream.abandonedCount(1).then(() => Date.now());
    const retakenAt = upstream.received(2).then(() => Date.now());
    const { code, at: exitedAt } = await exitOf(first);
    t.equal(code, 0, 'the draining worker exits 0');
    t.ok(exitedAt - signalledAt < graceMs + 1000, `exited ${exitedAt - signalledAt} ms after SIGTERM`);
    t.match(await first.output, /task released at shutdown/);
    const gap = (await retakenAt) - (await abandonedAt);
    t.ok(gap < 1000, `the other worker called the provider ${gap} ms after the release (lease: 60 s, poll: 60 s)`);

    for (let i = 0; i < 100; i++) {
      const now = await store.tasks.getTask(account.id, task.task_id);
      if (now?.status === 'COMPLETED') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const done = await store.tasks.getTask(account.id, task.task_id);
    t.equal(done?.status, 'COMPLETED', 'completed by the other worker');
    t.equal((await store.accounts.getAccount(account.id))?.balance, 1000 - task.cost, 'charged once');
    t.comment(`released task: taken by the other worker ${gap} ms after the release`);
  },
);

t.test("a worker's /readyz answers 503 once it drains, its /healthz and /metrics still 200", async (t) => {
  const draining = new AbortController();
  const app = buildWorkerMetricsApp(new Registry(), { draining: draining.signal });
  t.teardown(() => app.close());
  t.equal((await app.inject({ url: '/readyz' })).statusCode, 200);
  draining.abort();
  const ready = await app.inject({ url: '/readyz' });
  t.equal(ready.statusCode, 503);
  t.same(ready.json(), { status: 'unavailable' });
  t.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
  t.equal((await app.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 200);
});
