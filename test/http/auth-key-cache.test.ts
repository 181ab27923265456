import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { API_KEY_CACHE_TTL_MS, issueApiKey } from '../../src/services/api-keys.js';
import { fileTestApp, type TestApp } from '../helpers/app.js';

const ACCOUNT = '/api/v1/account';
const unknownWellFormedKey = () => `igk_${randomBytes(32).toString('base64url')}`;

/** A clock that moves only when the test says so. */
function manualClock() {
  let ms = Date.parse('2030-01-01T00:00:00.000Z');
  return {
    now: () => new Date(ms),
    advance(by: number) {
      ms += by;
    },
  };
}

/**
 * The file's app, on a clock of the file's: each test reads it relative to where it stands and
 * moves it on as it needs, each with a key of its own.
 */
const clock = manualClock();
const ctx = fileTestApp({}, { now: clock.now });

/** Counts the store lookups of API keys the app makes while the test runs. */
function countKeyLookups(t: Test, store: TestApp['store']): { readonly count: number } {
  const counter = { count: 0 };
  const lookUp = store.accounts.findActiveApiKey;
  t.teardown(() => {
    store.accounts.findActiveApiKey = lookUp;
  });
  store.accounts.findActiveApiKey = (hash: string) => {
    counter.count++;
    return lookUp.call(store.accounts, hash);
  };
  return counter;
}

t.test('a key found active is trusted for at most one second (the revocation delay)', async (t) => {
  t.ok(API_KEY_CACHE_TTL_MS > 0 && API_KEY_CACHE_TTL_MS <= 1000);
});

t.test('a revoked key is refused once the cache TTL has passed since it was last confirmed', async (t) => {
  const { app, store, newAccount } = ctx();
  const { key, auth } = await newAccount();
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode,
    200,
    'confirmed by the store, now cached',
  );

  t.ok(await store.accounts.revokeApiKey(key.slice(0, 12), clock.now()), 'revoked (as the CLI would, behind the app)');
  clock.advance(API_KEY_CACHE_TTL_MS - 1);
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode,
    200,
    'the cached answer until the TTL ends',
  );

  clock.advance(1);
  const refused = await app.inject({ method: 'GET', url: ACCOUNT, headers: auth });
  t.equal(refused.statusCode, 401, 'refused once the TTL has passed');
  t.equal(refused.json().code, 'unauthorized');
  t.equal(refused.headers['www-authenticate'], 'Bearer');

  clock.advance(60_000);
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode, 401, 'and stays refused');
});

t.test('an active key is looked up in the store once per TTL, not once per request', async (t) => {
  const { app, store, newAccount } = ctx();
  const { auth } = await newAccount();
  const lookups = countKeyLookups(t, store);
  for (let i = 0; i < 5; i++)
    t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode, 200);
  t.equal(lookups.count, 1, 'five requests within the TTL, one lookup');
  clock.advance(API_KEY_CACHE_TTL_MS);
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode, 200);
  t.equal(lookups.count, 2, 'looked up again once the TTL has passed');
});

t.test('unknown keys are not cached: each attempt asks the store', async (t) => {
  const { app, store } = ctx();
  const lookups = countKeyLookups(t, store);
  const headers = { authorization: `Bearer ${unknownWellFormedKey()}` };
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers })).statusCode, 401);
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers })).statusCode, 401);
  t.equal(lookups.count, 2);
});

t.test('each key is cached on its own: two keys of one account are two callers', async (t) => {
  const { app, store, newAccount } = ctx();
  const first = await newAccount();
  const second = await issueApiKey(store, first.accountId, 'second', clock.now());
  const keyIdOf = async (key: string) =>
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: { authorization: `Bearer ${key}` } })).json().data.key
      .key_id as string;
  const firstId = await keyIdOf(first.key);
  t.equal(await keyIdOf(second.key), second.record.id);
  t.not(firstId, second.record.id);
  t.equal(await keyIdOf(first.key), firstId, 'cached answers keep their own caller');
  t.equal(await keyIdOf(second.key), second.record.id);
});

t.test("a key's last use is recorded with its first request, then at most once a minute", async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount();
  const lastUsed = async () => (await store.accounts.listApiKeys(accountId))[0].lastUsedAt?.toISOString() ?? null;
  t.equal(await lastUsed(), null, 'never used yet');

  const first = clock.now().toISOString();
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers: auth })).statusCode, 200);
  t.equal(await lastUsed(), first, 'recorded by the first request');

  clock.advance(59_000);
  await app.inject({ method: 'GET', url: ACCOUNT, headers: auth });
  t.equal(await lastUsed(), first, 'not written again within the minute');

  clock.advance(1_000);
  const later = clock.now().toISOString();
  await app.inject({ method: 'GET', url: ACCOUNT, headers: auth });
  t.equal(await lastUsed(), later, 'written again once the minute is over');
});
