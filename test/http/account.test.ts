import t from 'tap';
import { API_KEY_CACHE_TTL_MS } from '../../src/services/api-keys.js';
import { issueApiKey } from '../../src/services/api-keys.js';
import { fileTestApp } from '../helpers/app.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';

const CREATE = '/api/v1/images/generations';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' }; // 25 tokens

/**
 * The app's clock runs with the real one, `ahead` milliseconds in front of it: a test that needs time
 * to pass moves it on, and never back, so what any test stores (grants in real time, debits in the
 * app's) keeps its order.
 */
let ahead = 0;
const ctx = fileTestApp(
  { RATE_LIMIT_CREATES_PER_MIN: '7', RATE_LIMIT_REQUESTS_PER_MIN: '70', MAX_ACTIVE_TASKS: '5' },
  { now: () => new Date(Date.now() + ahead) },
);

t.test('GET /account: balance, the calling key and the configured limits', async (t) => {
  const { app, newAccount } = ctx();
  const { accountId, key, auth } = await newAccount(300);
  const res = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
  t.equal(res.statusCode, 200);
  const { data } = res.json();
  t.equal(data.account_id, accountId);
  t.equal(data.balance, 300);
  t.equal(data.key.prefix, key.slice(0, data.key.prefix.length));
  t.ok(data.key.prefix.length >= 8 && data.key.prefix.length < key.length, 'a prefix, not the key');
  t.notOk(JSON.stringify(data).includes(key), 'the key itself is never shown');
  t.match(data.key, { key_id: String, name: 'test' });
  t.same(data.limits, { creates_per_min: 7, requests_per_min: 70, max_active_tasks: 5 });
});

t.test('GET /account names the key that made the request', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId } = await newAccount(0);
  const second = await issueApiKey(store, accountId, 'ci-runner', new Date());
  const res = await app.inject({
    method: 'GET',
    url: '/api/v1/account',
    headers: { authorization: `Bearer ${second.key}` },
  });
  t.match(res.json().data.key, { key_id: second.record.id, name: 'ci-runner', prefix: second.record.prefix });
});

t.test('the balance follows creates, and the ledger lists them newest first', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const created = [];
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
    t.equal(res.statusCode, 202);
    created.push(res.json().data.task_id as string);
  }
  const account = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
  t.equal(account.json().data.balance, 25);

  const ledger = await app.inject({ method: 'GET', url: '/api/v1/account/ledger', headers: auth });
  t.equal(ledger.statusCode, 200);
  const { data, next_cursor } = ledger.json();
  t.equal(next_cursor, null);
  t.same(
    data.map((e: { kind: string; amount: number; balance_after: number; task_id: string | null }) => [
      e.kind,
      e.amount,
      e.balance_after,
      e.task_id,
    ]),
    [
      ['debit', 25, 25, created[2]],
      ['debit', 25, 50, created[1]],
      ['debit', 25, 75, created[0]],
      ['grant', 100, 100, null],
    ],
  );
  t.match(data[3], { id: String, note: 'opening balance', created_at: /^\d{4}-\d\d-\d\dT/ });
  await assertLedgerInvariant(t, store, accountId);
});

t.test('GET /account/ledger pages with limit and cursor', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(10);
  for (let i = 0; i < 4; i++)
    await store.accounts.grantTokens({ accountId, amount: i + 1, note: `grant ${i}`, now: new Date() });

  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const url: string = `/api/v1/account/ledger?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
    const res = await app.inject({ method: 'GET', url, headers: auth });
    t.equal(res.statusCode, 200);
    const body = res.json();
    t.ok(body.data.length <= 2);
    ids.push(...body.data.map((e: { id: string }) => e.id));
    cursor = body.next_cursor;
    pages++;
  } while (cursor);
  t.equal(pages, 3, '5 entries in pages of 2');
  t.equal(new Set(ids).size, 5, 'every entry exactly once');

  const first = await app.inject({ method: 'GET', url: '/api/v1/account/ledger', headers: auth });
  t.equal(first.json().data.length, 5, 'default limit (20) holds them all');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('GET /account/ledger refuses a bad limit, cursor or unknown parameter', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(10);
  for (const [query, pointer] of [
    ['limit=0', '/limit'],
    ['limit=101', '/limit'],
    ['limit=ten', '/limit'],
    ['cursor=%21%21', '/cursor'],
    ['page=2', '/page'],
  ]) {
    const res = await app.inject({ method: 'GET', url: `/api/v1/account/ledger?${query}`, headers: auth });
    t.equal(res.statusCode, 400, query);
    t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8');
    t.match(res.json(), { code: 'invalid_request', errors: [{ location: 'query', pointer }] }, query);
  }
});

t.test('another account never sees this ledger', async (t) => {
  const { app, newAccount } = ctx();
  const a = await newAccount(100);
  const b = await newAccount(5);
  await app.inject({ method: 'POST', url: CREATE, headers: a.auth, payload: BODY });
  const res = await app.inject({ method: 'GET', url: '/api/v1/account/ledger', headers: b.auth });
  t.same(
    res.json().data.map((e: { amount: number }) => e.amount),
    [5],
  );
});

t.test('account routes need a key', async (t) => {
  const { app } = ctx();
  for (const url of ['/api/v1/account', '/api/v1/account/ledger']) {
    const res = await app.inject({ method: 'GET', url });
    t.equal(res.statusCode, 401, url);
    t.equal(res.headers['www-authenticate'], 'Bearer');
    t.equal(res.json().code, 'unauthorized');
  }
});

t.test(
  'a revoked key is refused once the key cache TTL (at most a second) has passed; the account and its other keys are not',
  async (t) => {
    const { app, store, newAccount } = ctx();
    const now = () => new Date(Date.now() + ahead);
    const { accountId, auth } = await newAccount(100);
    const other = await issueApiKey(store, accountId, 'other', now());

    const before = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
    t.equal(before.statusCode, 200);
    const keyId = before.json().data.key.key_id as string;
    t.equal(await store.accounts.revokeApiKey(keyId, now()), true);
    ahead += API_KEY_CACHE_TTL_MS;

    const after = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
    t.equal(after.statusCode, 401);
    t.equal(after.json().code, 'unauthorized');
    const create = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
    t.equal(create.statusCode, 401, 'a revoked key cannot spend');

    const viaOther = await app.inject({
      method: 'GET',
      url: '/api/v1/account',
      headers: { authorization: `Bearer ${other.key}` },
    });
    t.equal(viaOther.statusCode, 200);
    t.equal(viaOther.json().data.balance, 100, 'nothing was debited');
    await assertLedgerInvariant(t, store, accountId);
  },
);

t.test('revoking by prefix works too, and listing keys never shows a key', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, key, auth } = await newAccount(0);
  const [record] = await store.accounts.listApiKeys(accountId);
  t.match(record, { prefix: key.slice(0, record.prefix.length), name: 'test', createdAt: Date, revokedAt: null });
  t.notOk(JSON.stringify(await store.accounts.listApiKeys()).includes(key));
  t.equal(await store.accounts.revokeApiKey(record.prefix, new Date()), true);
  t.equal(await store.accounts.revokeApiKey(record.prefix, new Date()), false, 'already revoked');
  const res = await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth });
  t.equal(res.statusCode, 401);
});
