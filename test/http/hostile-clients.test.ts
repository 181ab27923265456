import t from 'tap';
import { buildTestApp } from '../helpers/app.js';

/** Issue 36: what a hostile client tried, each refused (or served) as DESIGN 3.6–3.8 say. */

const ACCOUNT = '/api/v1/account';

t.test('60 bad keys from one address, then a good key → 200; the 61st bad key → 429', async (t) => {
  const { app, newAccount, config } = await buildTestApp(t);
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
