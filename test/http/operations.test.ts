import t from 'tap';
import { buildTestApp } from '../helpers/app.js';

t.test('GET /metrics serves Prometheus text with per-route latency, without auth', async (t) => {
  const { app, newAccount } = await buildTestApp(t);
  const { auth } = await newAccount();
  await app.inject({ url: '/api/v1/models', headers: auth });
  await app.inject({ url: '/api/v1/models' });
  const response = await app.inject({ url: '/metrics' });
  t.equal(response.statusCode, 200);
  t.match(response.headers['content-type'], /^text\/plain/);
  t.match(
    response.body,
    /http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/models",status="200"\} 1/,
  );
  t.match(response.body, /http_problem_responses_total\{status="401"\} 1/);
  t.match(response.body, /process_cpu_user_seconds_total/);
});

t.test('GET /readyz is 503 naming the failing dependency', async (t) => {
  const { app, store } = await buildTestApp(t);
  await store.close();
  const response = await app.inject({ url: '/readyz' });
  t.equal(response.statusCode, 503);
  t.match(response.json(), { status: 'unavailable', checks: { store: 'failing', blobs: 'ok' } });
});

t.test('Swagger UI and the OpenAPI document are served', async (t) => {
  const { app } = await buildTestApp(t);
  const ui = await app.inject({ url: '/docs/' });
  t.equal(ui.statusCode, 200);
  t.match(ui.body, /swagger/i);
  const json = await app.inject({ url: '/openapi.json' });
  t.equal(json.json().openapi, '3.1.0');
  const yaml = await app.inject({ url: '/openapi.yaml' });
  t.match(yaml.body, /^openapi: 3\.1\.0/);
});
