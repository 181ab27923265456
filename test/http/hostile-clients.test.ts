import { Registry } from 'prom-client';
import t from 'tap';
import { buildWorkerMetricsApp } from '../../src/http/worker-metrics-app.js';
import { fileTestApp } from '../helpers/app.js';

/** Decision 0018: what a hostile client tried, each refused (or served) as docs/design.md §3.6–§3.8 say. */

const ACCOUNT = '/api/v1/account';

// One app for the file, each test with its own account; failed-auth budgets are per client
// address, so the test that spends one sends from an address of its own. METRICS_TOKEN is read
// when the app is built: the test of it has an app of its own configuration.
const ctx = fileTestApp();
const METRICS_TOKEN = 'metrics-token-0123456789';
const withMetricsToken = fileTestApp({ METRICS_TOKEN });

t.test('60 bad keys from one address, then a good key → 200; the 61st bad key → 429', async (t) => {
  const { app, newAccount, config } = ctx();
  t.equal(config.RATE_LIMIT_AUTH_FAILURES_PER_MIN, 60, 'the default budget');
  const { auth } = await newAccount(10);
  const remoteAddress = '203.0.113.20';
  const statuses = new Set<number>();
  for (let i = 0; i < 60; i++) {
    const wrong = { authorization: `Bearer igk_${String(i).padStart(43, 'A')}` };
    statuses.add((await app.inject({ url: ACCOUNT, headers: wrong, remoteAddress })).statusCode);
  }
  t.same([...statuses], [401], 'sixty plain 401s');
  t.equal((await app.inject({ url: ACCOUNT, headers: auth, remoteAddress })).statusCode, 200, 'the valid key works');
  const bad = await app.inject({ url: ACCOUNT, headers: { authorization: 'Bearer nope' }, remoteAddress });
  t.equal(bad.statusCode, 429);
  t.equal(bad.json().code, 'rate_limited');
  t.ok(Number(bad.headers['retry-after']) >= 1);
});

t.test(
  'webhook URLs that parsers disagree on, or that name a port of another service → 400 /webhook_url',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount(1000);
    const create = (webhook_url: string) =>
      app.inject({
        method: 'POST',
        url: '/api/v1/images/generations',
        headers: auth,
        payload: { model: 'alpha-pro', prompt: 'a kite', webhook_url },
      });
    for (const url of [
      'https://8.8.8.8\\@127.0.0.1/',
      ' https://8.8.8.8/',
      'https://8.8.8.8/ ',
      'https:8.8.8.8',
      'https:///8.8.8.8',
      'https://user@8.8.8.8/',
      'https://user:pw@8.8.8.8/',
      'https://8.8.8.8:22/',
      'https://8.8.8.8:0/',
      'https://134744072/',
    ]) {
      const res = await create(url);
      t.equal(res.statusCode, 400, JSON.stringify(url));
      t.match(res.json(), { code: 'invalid_request', errors: [{ pointer: '/webhook_url', location: 'body' }] });
    }
    const { balance } = (await (await app.inject({ url: ACCOUNT, headers: auth })).json()).data;
    t.equal(balance, 1000, 'nothing charged');

    // Nothing is sent in this test (no dispatcher runs): the URL is only read and stored.
    const accepted = await create('HTTPS://8.8.8.8:443/Hook');
    t.equal(accepted.statusCode, 202);
    t.equal(accepted.json().data.webhook_url, 'https://8.8.8.8/Hook', 'stored and shown as its normalised href');
  },
);

t.test('secrets and keyed answers are not cached; nosniff everywhere; /docs cannot be framed', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(10);
  for (const url of ['/api/v1/webhooks/secret', ACCOUNT, '/api/v1/account/ledger']) {
    const res = await app.inject({ url, headers: auth });
    t.equal(res.statusCode, 200, url);
    t.equal(res.headers['cache-control'], 'no-store', `${url}: no-store`);
    t.equal(res.headers['x-content-type-options'], 'nosniff', `${url}: nosniff`);
  }
  for (const url of ['/healthz', '/openapi.json', '/api/v1/nothing-here']) {
    t.equal((await app.inject({ url })).headers['x-content-type-options'], 'nosniff', url);
  }
  const docs = await app.inject({ url: '/docs/' });
  t.equal(docs.statusCode, 200);
  t.match(docs.headers['content-security-policy'], /frame-ancestors 'none'/);
});

t.test('/metrics: loopback clients only, unless METRICS_TOKEN is set; then only with the token', async (t) => {
  await t.test('without a token', async (t) => {
    const { app } = ctx();
    t.equal((await app.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 200);
    t.equal((await app.inject({ url: '/metrics', remoteAddress: '::1' })).statusCode, 200);
    const outside = await app.inject({ url: '/metrics', remoteAddress: '203.0.113.5' });
    t.equal(outside.statusCode, 404);
    t.equal(outside.json().code, 'not_found');
  });
  await t.test('with a token, on the API and on a worker process alike', async (t) => {
    const { app } = withMetricsToken();
    const token = METRICS_TOKEN;
    const worker = buildWorkerMetricsApp(new Registry(), { metricsToken: token });
    t.teardown(() => worker.close());
    for (const server of [app, worker]) {
      const none = await server.inject({ url: '/metrics', remoteAddress: '127.0.0.1' });
      t.equal(none.statusCode, 401, 'even from loopback, no token: 401');
      t.equal(none.headers['www-authenticate'], 'Bearer');
      const wrong = { authorization: `Bearer ${token}x` };
      t.equal((await server.inject({ url: '/metrics', headers: wrong })).statusCode, 401);
      const right = { authorization: `Bearer ${token}` };
      const res = await server.inject({ url: '/metrics', headers: right, remoteAddress: '203.0.113.5' });
      t.equal(res.statusCode, 200, 'the token from anywhere');
      t.match(res.headers['content-type'], /^text\/plain/, 'Prometheus text');
    }
  });
  await t.test("a worker process's /metrics without a token answers loopback only", async (t) => {
    const worker = buildWorkerMetricsApp(new Registry());
    t.teardown(() => worker.close());
    t.equal((await worker.inject({ url: '/metrics', remoteAddress: '127.0.0.1' })).statusCode, 200);
    t.equal((await worker.inject({ url: '/metrics', remoteAddress: '198.51.100.7' })).statusCode, 404);
  });
});

t.test('a prompt of whitespace alone is 400 at /prompt, and nothing is charged', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(1000);
  for (const prompt of ['     ', '   \t\n ', '\u00a0\u3000\u2003']) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'alpha-pro', prompt },
    });
    t.equal(res.statusCode, 400, JSON.stringify(prompt));
    t.match(res.json(), {
      code: 'invalid_request',
      errors: [{ pointer: '/prompt', location: 'body', detail: /other than whitespace/ }],
    });
  }
  t.equal((await app.inject({ url: ACCOUNT, headers: auth })).json().data.balance, 1000, 'nothing charged');
});

t.test('a JSON body that is not valid UTF-8 is 400 invalid_json', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(1000);
  const bytes = Buffer.concat([
    Buffer.from('{"model":"alpha-pro","prompt":"a kite '),
    Buffer.from([0xff, 0xfe, 0xc3]),
    Buffer.from('"}'),
  ]);
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: { ...auth, 'content-type': 'application/json' },
    payload: bytes,
  });
  t.equal(res.statusCode, 400);
  t.equal(res.json().code, 'invalid_json');
  t.equal((await app.inject({ url: ACCOUNT, headers: auth })).json().data.balance, 1000, 'nothing charged');
});
