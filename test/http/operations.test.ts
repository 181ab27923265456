import t from 'tap';
import { buildTestApp, fileTestApp } from '../helpers/app.js';

const ctx = fileTestApp();

/** The value of one sample of /metrics (0 when the series has none yet). */
async function sample(app: ReturnType<typeof ctx>['app'], series: string): Promise<number> {
  const body = (await app.inject({ url: '/metrics' })).body;
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

t.test('GET /metrics serves Prometheus text with per-route latency, without auth', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  // The file's app has served other tests: each series is read as what this test's requests added.
  const modelsServed = 'http_request_duration_seconds_count{method="GET",route="/api/v1/models",status="200"}';
  const unauthorized = 'http_problem_responses_total{status="401"}';
  const before = { modelsServed: await sample(app, modelsServed), unauthorized: await sample(app, unauthorized) };
  await app.inject({ url: '/api/v1/models', headers: auth });
  await app.inject({ url: '/api/v1/models' });
  const response = await app.inject({ url: '/metrics' });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /^text\/plain/);
  t.equal(await sample(app, modelsServed), before.modelsServed + 1, 'the keyed request, timed under its route');
  t.equal(await sample(app, unauthorized), before.unauthorized + 1, 'the keyless one, counted as a 401 problem');
  t.match(response.body, /process_cpu_user_seconds_total/);
});

t.test(
  'GET /metrics counts the requests waiting for a task, from when the service holds one to its answer',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const waits = async () => {
      const body = (await app.inject({ url: '/metrics' })).body;
      return Number(/^imagegen_task_waits (\d+)$/m.exec(body)?.[1]);
    };
    t.equal(await waits(), 0, 'none before');
    const created = await app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'beta-v5-pro', prompt: 'a tin robot' },
    });
    const taskId = created.json().data.task_id;
    // No worker runs in this app: the task stays CREATED and the long-poll waits until the cancel.
    const longPoll = app.inject({ url: `/api/v1/images/generations/${taskId}?wait=30`, headers: auth });
    while ((await waits()) === 0) await new Promise((resolve) => setImmediate(resolve));
    t.equal(await waits(), 1, 'the long-poll, once held');
    await app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: auth });
    t.equal((await longPoll).json().data.status, 'CANCELED');
    t.equal(await waits(), 0, 'none once it is answered');
  },
);

t.test('GET /readyz is 503 naming the failing dependency', async (t) => {
  // An app of its own: its store is closed.
  const { app, store } = await buildTestApp(t);
  await store.close();
  const response = await app.inject({ url: '/readyz' });
  t.equal(response.statusCode, 503);
  t.match(response.json(), { status: 'unavailable', checks: { store: 'failing', blobs: 'ok' } });
});

t.test('Swagger UI and the OpenAPI document are served', async (t) => {
  const { app } = ctx();
  const ui = await app.inject({ url: '/docs/' });
  t.equal(ui.statusCode, 200);
  t.match(ui.body, /swagger/i);
  const json = await app.inject({ url: '/openapi.json' });
  t.equal(json.json().openapi, '3.1.0');
  const yaml = await app.inject({ url: '/openapi.yaml' });
  t.match(yaml.body, /^openapi: 3\.1\.0/);
});
