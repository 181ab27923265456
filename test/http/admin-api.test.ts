import OpenAI from 'openai';
import t from 'tap';
import { fileTestApp } from '../helpers/app.js';
import { loopbackPort } from '../helpers/listening.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { callTool, mcpClient, problemOf } from '../helpers/mcp.js';
import { issueAdminKey } from '../../src/services/admin-keys.js';

/**
 * The admin API (/admin/v1) and scoped keys on every face (docs/design.md §3.9). One app: admin
 * keys from ADMIN_API_KEY and from the store; tests isolate themselves by account.
 */
const ENV_ADMIN_KEY = 'environment-admin-key-0123456789abcdef';
const ctx = fileTestApp({ ADMIN_API_KEY: ENV_ADMIN_KEY });
const admin = { authorization: `Bearer ${ENV_ADMIN_KEY}` };
const PRICE = 25; // alpha-pro at 1K
const create = (model = 'alpha-pro') => ({ model, prompt: 'a lighthouse at dawn' });

async function newAccount(tokens = 1000): Promise<string> {
  const { app } = ctx();
  const res = await app.inject({
    method: 'POST',
    url: '/admin/v1/accounts',
    headers: admin,
    payload: { name: 'Acme Studio', tokens },
  });
  return res.json().data.account_id;
}

async function newKey(accountId: string, scope: object = {}): Promise<{ key: string; keyId: string }> {
  const { app } = ctx();
  const res = await app.inject({
    method: 'POST',
    url: `/admin/v1/accounts/${accountId}/keys`,
    headers: admin,
    payload: { name: 'scoped', ...scope },
  });
  if (res.statusCode !== 201) throw new Error(res.body);
  return { key: res.json().data.key, keyId: res.json().data.key_id };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

t.test('an account key is 401 on /admin; an admin key is 401 on /api/v1, /v1 and /mcp', async (t) => {
  const { app, store } = ctx();
  const { key } = await ctx().newAccount();
  const accountKey = await app.inject({ url: '/admin/v1/accounts', headers: bearer(key) });
  t.equal(accountKey.statusCode, 401);
  t.equal(accountKey.json().code, 'unauthorized');
  t.equal(accountKey.headers['cache-control'], 'no-store');
  const stored = await issueAdminKey(store, 'ops', new Date());
  t.equal((await app.inject({ url: '/admin/v1/accounts', headers: bearer(stored.key) })).statusCode, 200);
  for (const key of [stored.key, ENV_ADMIN_KEY]) {
    t.equal((await app.inject({ url: '/api/v1/account', headers: bearer(key) })).statusCode, 401, '/api/v1');
    t.equal((await app.inject({ url: '/v1/models', headers: bearer(key) })).statusCode, 401, '/v1');
    const mcp = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { ...bearer(key), accept: 'application/json, text/event-stream' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    t.equal(mcp.statusCode, 401, '/mcp');
  }
  await store.admin.revokeAdminKey(stored.record.id, new Date());
  t.equal((await app.inject({ url: '/admin/v1/accounts', headers: bearer(stored.key) })).statusCode, 401, 'revoked');
});

t.test('every admin request is in the audit log, refusals included; no CORS on /admin', async (t) => {
  const { app } = ctx();
  const refused = await app.inject({
    url: '/admin/v1/accounts',
    headers: { authorization: 'Bearer nope', 'x-request-id': 'audit-refused-1' },
  });
  t.equal(refused.statusCode, 401);
  const accountId = await newAccount();
  const log = (await app.inject({ url: '/admin/v1/audit-log?limit=100', headers: admin })).json().data;
  const refusal = log.find((e: { request_id: string }) => e.request_id === 'audit-refused-1');
  t.match(refusal, { admin_key_id: null, status: 401, action: 'GET /admin/v1/accounts' });
  t.ok(
    log.some((e: { target: string; status: number }) => e.target === null && e.status === 201),
    'the create is logged',
  );
  await app.inject({ url: `/admin/v1/accounts/${accountId}`, headers: admin });
  const latest = (await app.inject({ url: '/admin/v1/audit-log?limit=2', headers: admin })).json().data;
  t.match(latest[0], { admin_key_id: 'ADMIN_API_KEY', target: accountId, status: 200 });
  const cors = await app.inject({ url: '/admin/v1/accounts', headers: { ...admin, origin: 'https://evil.example' } });
  t.notOk(cors.headers['access-control-allow-origin'], 'no CORS header');
  const preflight = await app.inject({
    method: 'OPTIONS',
    url: '/admin/v1/accounts',
    headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
  });
  t.notOk(preflight.headers['access-control-allow-origin'], 'no preflight answer');
});

t.test('accounts: create, read, list and search, rename, suspend and resume', async (t) => {
  const { app } = ctx();
  const accountId = await newAccount(500);
  const read = (await app.inject({ url: `/admin/v1/accounts/${accountId}`, headers: admin })).json().data;
  t.match(read, { account_id: accountId, name: 'Acme Studio', status: 'active', balance: 500 });
  const renamed = await app.inject({
    method: 'PATCH',
    url: `/admin/v1/accounts/${accountId}`,
    headers: admin,
    payload: { name: 'Zebra_Works 42%' },
  });
  t.equal(renamed.json().data.name, 'Zebra_Works 42%');
  const found = await app.inject({ url: '/admin/v1/accounts?q=works%2042%25', headers: admin });
  t.same(
    found.json().data.map((a: { account_id: string }) => a.account_id),
    [accountId],
    'search by a part of the name, any case, wildcards literal',
  );
  const { key } = await newKey(accountId);
  await app.inject({
    method: 'PATCH',
    url: `/admin/v1/accounts/${accountId}`,
    headers: admin,
    payload: { status: 'suspended' },
  });
  const suspended = await app.inject({ url: '/admin/v1/accounts?status=suspended&limit=100', headers: admin });
  t.ok(suspended.json().data.some((a: { account_id: string }) => a.account_id === accountId));
  const refused = await app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: bearer(key),
    payload: create(),
  });
  t.equal(refused.statusCode, 403);
  t.equal(refused.json().code, 'account_suspended');
  await app.inject({
    method: 'PATCH',
    url: `/admin/v1/accounts/${accountId}`,
    headers: admin,
    payload: { status: 'active' },
  });
  // The key's authentication is kept up to a second (API_KEY_CACHE_TTL_MS); admission reads the status itself.
  const missing = await app.inject({
    url: '/admin/v1/accounts/01937f4c-9a2b-7c3d-8e4f-a0b1c2d3e4f5',
    headers: admin,
  });
  t.equal(missing.statusCode, 404);
});

t.test('grants: Idempotency-Key required, applied once, an adjustment never below zero', async (t) => {
  const { app, store } = ctx();
  const accountId = await newAccount(100);
  const url = `/admin/v1/accounts/${accountId}/grants`;
  const noKey = await app.inject({ method: 'POST', url, headers: admin, payload: { tokens: 50, note: 'invoice' } });
  t.equal(noKey.statusCode, 400);
  t.match(noKey.json().errors[0], { location: 'header' });
  const grant = () =>
    app.inject({
      method: 'POST',
      url,
      headers: { ...admin, 'idempotency-key': 'inv-2026-001' },
      payload: { tokens: 50, note: 'invoice', reference: 'INV-2026-001' },
    });
  const [first, second] = await Promise.all([grant(), grant()]);
  t.equal(first.statusCode, 201);
  t.equal(second.statusCode, 201);
  t.equal(first.json().data.entry_id, second.json().data.entry_id, 'the retry answers the first entry');
  t.equal((await store.accounts.getAccount(accountId))?.balance, 150, 'applied once');
  const reused = await app.inject({
    method: 'POST',
    url,
    headers: { ...admin, 'idempotency-key': 'inv-2026-001' },
    payload: { tokens: 70, note: 'invoice' },
  });
  t.equal(reused.json().code, 'idempotency_key_reused');
  const below = await app.inject({
    method: 'POST',
    url,
    headers: { ...admin, 'idempotency-key': 'adj-1' },
    payload: { tokens: -151, note: 'chargeback' },
  });
  t.equal(below.statusCode, 409);
  t.match(below.json().errors[0], { pointer: '/tokens' });
  const adjusted = await app.inject({
    method: 'POST',
    url,
    headers: { ...admin, 'idempotency-key': 'adj-2' },
    payload: { tokens: -150, note: 'chargeback' },
  });
  t.match(adjusted.json().data, { kind: 'debit', amount: 150, balance_after: 0 });
  const ledger = (await app.inject({ url: `/admin/v1/accounts/${accountId}/ledger`, headers: admin })).json().data;
  t.same(
    ledger.map((e: { kind: string; amount: number }) => [e.kind, e.amount]),
    [
      ['debit', 150],
      ['grant', 50],
      ['grant', 100],
    ],
  );
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a scoped key: models, budget and expiry refused at admission; revoked at once', async (t) => {
  const { app } = ctx();
  const accountId = await newAccount(10_000);
  const { key, keyId } = await newKey(accountId, {
    models: ['alpha-pro'],
    token_budget: { tokens: 2 * PRICE, period: 'day' },
  });
  const post = (body: object, k = key) =>
    app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: bearer(k), payload: body });
  const estimate = await app.inject({
    method: 'POST',
    url: '/api/v1/images/estimates',
    headers: bearer(key),
    payload: create('beta-v5-pro'),
  });
  t.equal(estimate.json().code, 'model_not_allowed', 'an estimate promises nothing a create refuses');
  const other = await post(create('beta-v5-pro'));
  t.equal(other.statusCode, 403);
  t.match(other.json(), { code: 'model_not_allowed', errors: [{ pointer: '/model' }] });
  t.equal((await post(create())).statusCode, 202);
  const second = await post(create());
  t.equal(second.statusCode, 202);
  const over = await post(create());
  t.equal(over.statusCode, 402);
  t.equal(over.json().code, 'key_budget_exhausted');
  // A refund gives the budget back.
  await app.inject({
    method: 'POST',
    url: `/api/v1/images/generations/${second.json().data.task_id}/cancel`,
    headers: bearer(key),
  });
  t.equal((await post(create())).statusCode, 202, 'admitted again after the refund');
  const keys = (await app.inject({ url: `/admin/v1/accounts/${accountId}/keys`, headers: admin })).json().data;
  t.match(
    keys.find((k: { key_id: string }) => k.key_id === keyId),
    {
      models: ['alpha-pro'],
      token_budget: { tokens: 2 * PRICE, period: 'day' },
      budget_spent: 2 * PRICE,
    },
  );
  const expired = await newKey(accountId, { expires_at: '2020-01-01T00:00:00Z' });
  const refused = await post(create(), expired.key);
  t.equal(refused.statusCode, 401);
  t.equal((await app.inject({ method: 'DELETE', url: `/admin/v1/keys/${keyId}`, headers: admin })).statusCode, 204);
  t.equal((await post(create())).statusCode, 401, 'revoked');
});

t.test('50 parallel creates against a budget for 5 admit exactly 5', async (t) => {
  const { app, store } = ctx();
  const accountId = await newAccount(100_000);
  const { key } = await newKey(accountId, { token_budget: { tokens: 5 * PRICE, period: 'month' } });
  const answers = await Promise.all(
    Array.from({ length: 50 }, () =>
      app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: bearer(key), payload: create() }),
    ),
  );
  const statuses = answers.map((a) => a.statusCode);
  t.equal(statuses.filter((s) => s === 202).length, 5, 'five admitted');
  t.equal(statuses.filter((s) => s === 402).length, 45, 'the rest refused for the budget');
  t.equal((await store.accounts.getAccount(accountId))?.balance, 100_000 - 5 * PRICE);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('the openai SDK gets 429 insufficient_quota, the MCP SDK a tool error, for a spent budget', async (t) => {
  const { app } = ctx();
  const accountId = await newAccount(10_000);
  const { key } = await newKey(accountId, { token_budget: { tokens: PRICE - 1, period: null } });
  const base = `http://127.0.0.1:${await loopbackPort(app)}`;
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
  const error = await openai.images
    .generate({ model: 'alpha-pro', prompt: 'a lighthouse' })
    .catch((e: InstanceType<typeof OpenAI.APIError>) => e);
  t.ok(error instanceof OpenAI.RateLimitError, 'RateLimitError');
  t.match(error, { status: 429, code: 'insufficient_quota', type: 'insufficient_quota' });
  t.notOk((error as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after'), 'no Retry-After');
  const client = await mcpClient(t, base, key);
  const result = await callTool(client, 'generate_image', { model: 'alpha-pro', prompt: 'a lighthouse' });
  t.match(problemOf(result), { code: 'key_budget_exhausted', status: 402 });
  const scoped = await newKey(accountId, { models: ['beta-v5-pro'] });
  const wrongModel = await new OpenAI({ baseURL: `${base}/v1`, apiKey: scoped.key, maxRetries: 0 }).images
    .generate({ model: 'alpha-pro', prompt: 'a lighthouse' })
    .catch((e: InstanceType<typeof OpenAI.APIError>) => e);
  t.match(wrongModel, { status: 403, code: 'model_not_allowed' });
});

t.test('usage: admin report by day, model, account and key, JSON and CSV; self-service keys and usage', async (t) => {
  const { app } = ctx();
  const accountId = await newAccount(10_000);
  const { key, keyId } = await newKey(accountId);
  const post = () =>
    app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: bearer(key), payload: create() });
  await post();
  const canceled = (await post()).json().data.task_id;
  await app.inject({ method: 'POST', url: `/api/v1/images/generations/${canceled}/cancel`, headers: bearer(key) });
  const today = new Date().toISOString().slice(0, 10);
  const query = `from=${today}&to=${today}&group_by=day,model,account,key&account_id=${accountId}`;
  const report = await app.inject({ url: `/admin/v1/usage?${query}`, headers: admin });
  t.equal(report.statusCode, 200);
  t.same(report.json().data, [
    {
      day: today,
      model: 'alpha-pro',
      account_id: accountId,
      key_id: keyId,
      tasks: 2,
      images: 0,
      tokens_charged: 2 * PRICE,
      tokens_refunded: PRICE,
      failed: 0,
      canceled: 1,
    },
  ]);
  const csv = await app.inject({ url: `/admin/v1/usage?${query}&format=csv`, headers: admin });
  t.match(csv.headers['content-type'], /^text\/csv/);
  t.equal(
    csv.body,
    `day,model,account_id,key_id,tasks,images,tokens_charged,tokens_refunded,failed,canceled\r\n${today},alpha-pro,${accountId},${keyId},2,0,50,25,0,1\r\n`,
  );
  const badGroup = await app.inject({ url: `/admin/v1/usage?from=${today}&to=${today}&group_by=week`, headers: admin });
  t.match(badGroup.json(), { status: 400, errors: [{ pointer: '/group_by', location: 'query' }] });

  const own = await app.inject({ url: `/api/v1/usage?from=${today}&to=${today}&group_by=model`, headers: bearer(key) });
  t.same(own.json().data, [
    { model: 'alpha-pro', tasks: 2, images: 0, tokens_charged: 50, tokens_refunded: 25, failed: 0, canceled: 1 },
  ]);
  const noAccounts = await app.inject({
    url: `/api/v1/usage?from=${today}&to=${today}&group_by=account`,
    headers: bearer(key),
  });
  t.equal(noAccounts.statusCode, 400, 'an account sees only itself');
  const keys = await app.inject({ url: '/api/v1/keys', headers: bearer(key) });
  t.equal(keys.statusCode, 200);
  t.equal(keys.headers['cache-control'], 'no-store');
  t.same(
    keys.json().data.map((k: { key_id: string; budget_spent: number }) => [k.key_id, k.budget_spent]),
    [[keyId, PRICE]],
  );
  t.notMatch(keys.body, key, 'never the secret');
});

t.test('failed authentications on /admin and on the account faces spend one budget per address', async (t) => {
  const { app, config, newAccount } = ctx();
  const { auth } = await newAccount();
  const remoteAddress = '10.9.8.7';
  for (let i = 0; i < config.RATE_LIMIT_AUTH_FAILURES_PER_MIN; i++)
    await app.inject({ url: '/admin/v1/accounts', headers: { authorization: `Bearer wrong-${i}` }, remoteAddress });
  const shutOut = await app.inject({
    url: '/admin/v1/accounts',
    headers: { authorization: 'Bearer x' },
    remoteAddress,
  });
  t.equal(shutOut.statusCode, 429, '/admin shut out');
  const elsewhere = await app.inject({ url: '/api/v1/account', headers: { authorization: 'Bearer x' }, remoteAddress });
  t.equal(elsewhere.statusCode, 429, 'so is /api/v1 for the same address');
  t.equal(
    (await app.inject({ url: '/api/v1/account', headers: auth, remoteAddress })).statusCode,
    200,
    'a valid key is served',
  );
  t.equal((await app.inject({ url: '/admin/v1/accounts', headers: admin, remoteAddress })).statusCode, 200);
});

t.test("a key's own rate limits replace the service's, and /account shows them", async (t) => {
  const { app } = ctx();
  const accountId = await newAccount();
  const { key } = await newKey(accountId, { rate_limits: { requests_per_min: 2 } });
  const first = await app.inject({ url: '/api/v1/account', headers: bearer(key) });
  t.equal(first.json().data.limits.requests_per_min, 2);
  t.equal(first.headers['ratelimit-limit'], '2');
  await app.inject({ url: '/api/v1/account', headers: bearer(key) });
  const third = await app.inject({ url: '/api/v1/account', headers: bearer(key) });
  t.equal(third.statusCode, 429);
  t.equal(third.json().code, 'rate_limited');
});
