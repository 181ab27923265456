import { join } from 'node:path';
import t from 'tap';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import { loadConfig } from '../../src/config.js';
import { buildApp } from '../../src/http/app.js';
import { closeRateLimitCounters, openRateLimitCounters } from '../../src/runtime.js';
import { createAccountWithKey, issueApiKey } from '../../src/services/api-keys.js';
import { fileTestApp, type TestApp } from '../helpers/app.js';
import { lazyFileTestApp } from '../helpers/file-apps.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { needsRedis, REDIS_URL, redisWithPrefix } from '../helpers/redis.js';
import { testStoreAdapter } from '../helpers/store.js';

const CREATE = '/api/v1/images/generations';
const ACCOUNT = '/api/v1/account';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' }; // 25 tokens

// Four configurations serve the file's tests, each app built once: budgets are per API key, so
// each test has a key of its own (newAccount), and failed authentications are per client
// address, so each test that fails to authenticate does it from addresses of its own. A test
// reads the one budget it is about; the others of its app are the defaults or another test's.
const oneCreateThreeRequests = fileTestApp({ RATE_LIMIT_CREATES_PER_MIN: '1', RATE_LIMIT_REQUESTS_PER_MIN: '3' });
const twoCreatesTwoFailures = fileTestApp({
  RATE_LIMIT_CREATES_PER_MIN: '2',
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: '2',
});
const fiveCreatesTwoFailuresBehindProxy = fileTestApp({
  RATE_LIMIT_CREATES_PER_MIN: '5',
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: '2',
  TRUST_PROXY: '10.0.0.0/8, loopback',
});
const oneActiveTaskThreeFailures = fileTestApp({ MAX_ACTIVE_TASKS: '1', RATE_LIMIT_AUTH_FAILURES_PER_MIN: '3' });

t.test('creates: draft RateLimit-* headers, then 429 rate_limited with Retry-After, and no debit', async (t) => {
  const { app, store, newAccount } = twoCreatesTwoFailures();
  const { accountId, auth } = await newAccount(1000);

  const first = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(first.statusCode, 202);
  t.equal(first.headers['ratelimit-limit'], '2');
  t.equal(first.headers['ratelimit-remaining'], '1');
  t.ok(
    Number(first.headers['ratelimit-reset']) > 0 && Number(first.headers['ratelimit-reset']) <= 60,
    'reset in seconds within the window',
  );
  t.equal(first.headers['x-ratelimit-limit'], undefined, 'no legacy X- headers');

  const second = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(second.statusCode, 202);
  t.equal(second.headers['ratelimit-remaining'], '0');

  const limited = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(limited.statusCode, 429);
  t.equal(limited.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.match(limited.json(), { status: 429, code: 'rate_limited', request_id: String, detail: /2 creates per minute/ });
  t.equal(limited.headers['ratelimit-limit'], '2');
  t.equal(limited.headers['ratelimit-remaining'], '0');
  const retryAfter = Number(limited.headers['retry-after']);
  t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter} s`);

  t.equal((await store.accounts.getAccount(accountId))!.balance, 1000 - 2 * 25, 'the 429 debited nothing');
  t.equal((await store.tasks.listTasks(accountId, { limit: 10 })).items.length, 2, 'and created nothing');
  await assertLedgerInvariant(t, store, accountId);
});

t.test(
  'concurrent creates past the limit: exactly the limit gets through, the rest 429 and cost nothing',
  async (t) => {
    const { app, store, newAccount } = fiveCreatesTwoFailuresBehindProxy();
    const { accountId, auth } = await newAccount(1000);
    const responses = await Promise.all(
      Array.from({ length: 30 }, () => app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })),
    );
    t.equal(responses.filter((r) => r.statusCode === 202).length, 5);
    t.equal(responses.filter((r) => r.statusCode === 429).length, 25);
    t.equal((await store.accounts.getAccount(accountId))!.balance, 1000 - 5 * 25);
    await assertLedgerInvariant(t, store, accountId);
  },
);

t.test('creates and other requests have separate budgets', async (t) => {
  const { app, newAccount } = oneCreateThreeRequests();
  const { auth } = await newAccount(1000);
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  t.equal(
    (await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode,
    429,
    'creates spent',
  );

  const reads = [];
  for (let i = 0; i < 4; i++) reads.push(await app.inject({ method: 'GET', url: ACCOUNT, headers: auth }));
  t.same(
    reads.map((r) => r.statusCode),
    [200, 200, 200, 429],
    'reads have their own 3',
  );
  t.same(
    reads.map((r) => r.headers['ratelimit-limit']),
    ['3', '3', '3', '3'],
  );
  t.same(
    reads.map((r) => r.headers['ratelimit-remaining']),
    ['2', '1', '0', '0'],
  );
  t.equal(reads[3].json().code, 'rate_limited');

  const estimate = await app.inject({ method: 'POST', url: '/api/v1/images/estimates', headers: auth, payload: BODY });
  t.equal(estimate.statusCode, 429, 'every other /api/v1 route shares the request budget');
});

t.test('a HEAD request (fastify adds one per GET route) spends one request, as its GET does', async (t) => {
  const { app, newAccount } = oneCreateThreeRequests();
  const { auth } = await newAccount(100);
  const head = await app.inject({ method: 'HEAD', url: ACCOUNT, headers: auth });
  t.equal(head.statusCode, 200);
  t.equal(head.headers['ratelimit-remaining'], '2');
  const get = await app.inject({ method: 'GET', url: ACCOUNT, headers: auth });
  t.equal(get.headers['ratelimit-remaining'], '1');
});

t.test('limits are per API key, not per account', async (t) => {
  const { app, store, newAccount } = oneCreateThreeRequests();
  const { accountId, auth } = await newAccount(1000);
  const other = await issueApiKey(store, accountId, 'second key', new Date());
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 429);
  const viaOther = await app.inject({
    method: 'POST',
    url: CREATE,
    headers: { authorization: `Bearer ${other.key}` },
    payload: BODY,
  });
  t.equal(viaOther.statusCode, 202);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a rate-limited request with an Idempotency-Key takes no key and debits nothing', async (t) => {
  const { app, store, newAccount } = oneCreateThreeRequests();
  const { accountId, auth } = await newAccount(1000);
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  const limited = await app.inject({
    method: 'POST',
    url: CREATE,
    headers: { ...auth, 'idempotency-key': 'k1' },
    payload: BODY,
  });
  t.equal(limited.statusCode, 429);
  t.same(
    await store.idempotencyKeys.claimIdempotencyKey({
      accountId,
      key: 'k1',
      fingerprint: 'probe',
      leaseToken: 'probe',
      now: new Date(),
      leaseMs: 1,
      ttlMs: 1000,
    }),
    { outcome: 'acquired' },
    'the key is still unused',
  );
  t.equal((await store.accounts.getAccount(accountId))!.balance, 975);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('429 too_many_active_tasks carries Retry-After and rate-limit headers, and debits nothing', async (t) => {
  const { app, store, newAccount } = oneActiveTaskThreeFailures();
  const { accountId, auth } = await newAccount(1000);
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  const capped = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(capped.statusCode, 429);
  t.equal(capped.json().code, 'too_many_active_tasks');
  t.ok(Number(capped.headers['retry-after']) >= 1);
  t.equal(capped.headers['ratelimit-limit'], '600');
  t.equal((await store.accounts.getAccount(accountId))!.balance, 975);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('failed authentications are limited per client address; a valid key from it is still served', async (t) => {
  const { app, store, newAccount } = oneActiveTaskThreeFailures();
  const { auth } = await newAccount(100);
  let lookups = 0;
  const find = store.accounts.findActiveApiKey;
  t.teardown(() => {
    store.accounts.findActiveApiKey = find;
  });
  store.accounts.findActiveApiKey = async (hash) => {
    lookups++;
    return find.call(store.accounts, hash);
  };
  const wrong = { authorization: `Bearer igk_${'A'.repeat(43)}` };
  const attacker = '203.0.113.7';

  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress: attacker });
    t.equal(res.statusCode, 401, `failure ${i + 1} is a plain 401`);
  }
  t.equal(lookups, 3);

  const blocked = await app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress: attacker });
  t.equal(blocked.statusCode, 429);
  t.match(blocked.json(), { code: 'rate_limited', detail: /failed authentication/ });
  t.ok(Number(blocked.headers['retry-after']) >= 1, 'Retry-After');
  t.equal(blocked.headers['ratelimit-limit'], '3');
  t.equal(blocked.headers['ratelimit-remaining'], '0');
  const valid = await app.inject({ method: 'GET', url: ACCOUNT, headers: auth, remoteAddress: attacker });
  t.equal(valid.statusCode, 200, 'only failures are refused: a valid key from the same address is served');
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress: attacker })).statusCode,
    429,
    'and the next failure is refused again',
  );

  const elsewhere = await app.inject({ method: 'GET', url: ACCOUNT, headers: auth, remoteAddress: '198.51.100.1' });
  t.equal(elsewhere.statusCode, 200, 'other addresses are unaffected');
});

t.test('malformed keys count as failures; a missing header and successes do not', async (t) => {
  const { app, newAccount } = twoCreatesTwoFailures();
  const { auth } = await newAccount(100);
  const from = { remoteAddress: '203.0.113.9' };
  for (let i = 0; i < 5; i++) {
    t.equal((await app.inject({ method: 'GET', url: ACCOUNT, ...from })).statusCode, 401, 'no header: 401');
    t.equal(
      (await app.inject({ method: 'GET', url: ACCOUNT, headers: auth, ...from })).statusCode,
      200,
      'valid key: 200',
    );
  }
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: { authorization: 'Bearer not-a-key' }, ...from }))
      .statusCode,
    401,
  );
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: { authorization: 'Bearer also-not' }, ...from }))
      .statusCode,
    401,
  );
  t.equal(
    (await app.inject({ method: 'GET', url: ACCOUNT, headers: { authorization: 'Bearer third' }, ...from })).statusCode,
    429,
    'two malformed keys used the budget',
  );
  t.equal((await app.inject({ method: 'GET', url: ACCOUNT, headers: auth, ...from })).statusCode, 200);
});

t.test('an IPv6 client is counted by its /64, and an IPv4-mapped address as the IPv4 address', async (t) => {
  const { app } = twoCreatesTwoFailures();
  const wrong = { authorization: `Bearer igk_${'D'.repeat(43)}` };
  const fail = (remoteAddress: string) => app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress });

  t.equal((await fail('2001:db8:1:2::1')).statusCode, 401);
  t.equal((await fail('2001:db8:1:2:ffff:ffff:ffff:ffff')).statusCode, 401);
  t.equal((await fail('2001:db8:1:2::abcd')).statusCode, 429, 'a new address in the same /64 is the same client');
  t.equal((await fail('2001:db8:1:3::1')).statusCode, 401, 'the next /64 is another client');

  t.equal((await fail('::ffff:203.0.113.7')).statusCode, 401);
  t.equal((await fail('203.0.113.7')).statusCode, 401);
  t.equal((await fail('::ffff:cb00:7107')).statusCode, 429, 'mapped or not, written either way, one IPv4 client');
});

t.test('behind a trusted proxy (TRUST_PROXY), the address limited is the client X-Forwarded-For names', async (t) => {
  const proxy = '10.0.0.5';
  const wrong = { authorization: `Bearer igk_${'A'.repeat(43)}` };
  const via = (client: string) => ({ remoteAddress: proxy, headers: { ...wrong, 'x-forwarded-for': client } });

  await t.test('trusted: one client is shut out, another behind the same proxy is not', async (t) => {
    const { app } = fiveCreatesTwoFailuresBehindProxy();
    for (let i = 0; i < 2; i++)
      t.equal((await app.inject({ method: 'GET', url: ACCOUNT, ...via('203.0.113.7') })).statusCode, 401);
    t.equal(
      (await app.inject({ method: 'GET', url: ACCOUNT, ...via('203.0.113.7') })).statusCode,
      429,
      'the guessing client is shut out',
    );
    t.equal(
      (await app.inject({ method: 'GET', url: ACCOUNT, ...via('198.51.100.1') })).statusCode,
      401,
      'another client is not',
    );
  });

  await t.test('untrusted: X-Forwarded-For is ignored, so a client cannot pick its own address', async (t) => {
    const { app } = twoCreatesTwoFailures();
    for (let i = 0; i < 2; i++)
      t.equal((await app.inject({ method: 'GET', url: ACCOUNT, ...via(`203.0.113.${i}`) })).statusCode, 401);
    t.equal(
      (await app.inject({ method: 'GET', url: ACCOUNT, ...via('203.0.113.99') })).statusCode,
      429,
      'a new X-Forwarded-For does not escape the limit',
    );
  });

  await t.test('a bad TRUST_PROXY stops the process at start, naming the entry', async (t) => {
    for (const value of ['true', '2', '10.0.0.0/8, not-an-address', ',']) {
      t.throws(() => loadConfig({ TRUST_PROXY: value }), { message: /TRUST_PROXY/ }, value);
    }
    t.same(
      loadConfig({ TRUST_PROXY: '192.0.2.1, 10.0.0.0/8, ::1, fd00::/8, uniquelocal' }).TRUST_PROXY,
      '192.0.2.1, 10.0.0.0/8, ::1, fd00::/8, uniquelocal',
    );
  });
});

// ── shared counters in Redis ────────────────────────────────────────────────────────────────────

const withRedis = await needsRedis();

/**
 * Two API processes on one database and one Redis, under a key prefix of the file's own: built by
 * the first test that needs them (none where no Redis answers), closed after the file's last test.
 */
let twoProcesses: Promise<{ one: TestApp; two: FastifyInstance; redis: Redis; prefix: string }> | undefined;
function twoProcessesOnRedis() {
  twoProcesses ??= (async () => {
    // Registered first, so its teardown (every key under the prefix deleted) runs last.
    const { redis, prefix } = redisWithPrefix(t);
    const env = {
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      RATE_LIMIT_CREATES_PER_MIN: '2',
      RATE_LIMIT_AUTH_FAILURES_PER_MIN: '2',
    };
    const one = await lazyFileTestApp(env)();
    // The second "process": its own app and connection over the same database and Redis.
    const twoCounters = await openRateLimitCounters(one.config, () => {});
    t.teardown(() => closeRateLimitCounters(twoCounters));
    const two = await buildApp({
      config: one.config,
      store: one.store,
      blobs: one.blobs,
      mediaSigningSecret: 'test-signing-secret-0123456789abcdef',
      logger: false,
      rateLimitRedis: twoCounters,
    });
    t.teardown(() => two.close());
    return { one, two, redis, prefix };
  })();
  return twoProcesses;
}

t.test('with REDIS_URL two API processes share one budget', withRedis, async (t) => {
  const { one, two, redis, prefix } = await twoProcessesOnRedis();
  const { accountId, auth } = await one.newAccount(1000);

  t.equal((await one.app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  const fromTwo = await two.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(fromTwo.statusCode, 202);
  t.equal(fromTwo.headers['ratelimit-remaining'], '0', "the second process counted the first one's request");
  const limited = await one.app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.equal(limited.statusCode, 429);
  t.ok(Number(limited.headers['retry-after']) >= 1);

  const keys = await redis.keys(`${prefix}*`);
  t.ok(
    keys.length > 0 && keys.every((k) => k.startsWith(`${prefix}rl:`)),
    'every counter is under the configured prefix',
  );
  t.ok(
    keys.some((k) => k.includes('creates:')),
    'and names its budget',
  );
  t.equal((await one.store.accounts.getAccount(accountId))!.balance, 950);
  await assertLedgerInvariant(t, one.store, accountId);
});

t.test('with REDIS_URL failed authentications are counted across processes', withRedis, async (t) => {
  const { one, two } = await twoProcessesOnRedis();
  const wrong = { authorization: `Bearer igk_${'B'.repeat(43)}` };
  const remoteAddress = '203.0.113.50';
  t.equal((await one.app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress })).statusCode, 401);
  t.equal((await two.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress })).statusCode, 401);
  // Shared counters answer through a promise, where process memory answers at once: the same refusal.
  const blocked = await one.app.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress });
  t.equal(blocked.statusCode, 429);
  t.match(blocked.json(), { code: 'rate_limited', detail: /failed authentication/ });
  t.ok(Number(blocked.headers['retry-after']) >= 1, 'Retry-After');
  t.equal(blocked.headers['ratelimit-limit'], '2');
  t.equal(blocked.headers['ratelimit-remaining'], '0');
  t.equal(
    (await two.inject({ method: 'GET', url: ACCOUNT, headers: wrong, remoteAddress })).statusCode,
    429,
    'refused in the other process too',
  );
  const { auth } = await one.newAccount(100);
  t.equal(
    (await two.inject({ method: 'GET', url: ACCOUNT, headers: auth, remoteAddress })).statusCode,
    200,
    'while a valid key is served',
  );
});

t.test('when Redis stops answering, requests are served without a limit (fail open)', async (t) => {
  // An app of its own: its counters are a Redis client that never connects.
  const dir = t.testdir({});
  const config = loadConfig({
    DATA_DIR: dir,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_CREATES_PER_MIN: '1',
    RATE_LIMIT_AUTH_FAILURES_PER_MIN: '1',
  });
  const { store } = await testStoreAdapter().open(t, { dataDir: dir });
  // A client that never connects: every command fails at once (no offline queue).
  const deadRedis = new Redis('redis://127.0.0.1:1', {
    lazyConnect: true,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  deadRedis.on('error', () => {});
  const app = await buildApp({
    config,
    store,
    blobs: new FsBlobStore(join(dir, 'blobs')),
    mediaSigningSecret: 'test-signing-secret-0123456789abcdef',
    logger: false,
    rateLimitRedis: deadRedis,
  });
  t.teardown(async () => {
    await app.close();
    deadRedis.disconnect();
  });
  const { key } = await createAccountWithKey(store, { name: 'x', tokens: 100, now: new Date() });
  const auth = { authorization: `Bearer ${key}` };
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode, 202);
  t.equal(
    (await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY })).statusCode,
    202,
    'no counter, no limit',
  );
  const wrong = { authorization: `Bearer igk_${'C'.repeat(43)}` };
  for (let i = 0; i < 3; i++) {
    t.equal(
      (await app.inject({ method: 'GET', url: ACCOUNT, headers: wrong })).statusCode,
      401,
      `failed authentication ${i + 1}: 401, not shut out`,
    );
  }
});

t.test('an unreachable REDIS_URL stops the start with a message naming it', async (t) => {
  const config = loadConfig({ DATA_DIR: t.testdir({}), LOG_LEVEL: 'silent', REDIS_URL: 'redis://127.0.0.1:1' });
  await t.rejects(
    openRateLimitCounters(config, () => {}),
    /REDIS_URL/,
  );
});
