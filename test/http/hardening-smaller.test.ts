import t from 'tap';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { buildTestApp, fileTestApp } from '../helpers/app.js';
import { loopbackPort } from '../helpers/listening.js';
import { rawRequest } from '../helpers/raw-http.js';
import { testOnEveryStore } from '../helpers/store.js';
import { testWorker } from '../helpers/worker.js';

const ESTIMATE = '/api/v1/images/estimates';
const CREATE = '/api/v1/images/generations';

// One app for the file, each test with its own account. Its webhook hosts resolve as this table
// says, not through DNS: hooks.example.com to a public address, any other name to a private one.
const privateName: LookupAll = async (host) => [
  { address: host === 'hooks.example.com' ? '93.184.216.34' : '10.0.0.7', family: 4 },
];
const ctx = fileTestApp({}, { webhookLookup: privateName });

testOnEveryStore(
  t,
  'a prompt holding U+0000 is refused by create and estimate alike, at /prompt',
  async (t, storeAdapter) => {
    // PostgreSQL's text cannot hold U+0000: accepted, it would be a 500 there and a 202 on SQLite.
    // An app per store adapter: the test is of every store, whichever the file's app runs on.
    const { app, newAccount } = await buildTestApp(t, {}, { storeAdapter });
    const { auth } = await newAccount();
    for (const url of [CREATE, ESTIMATE]) {
      const res = await app.inject({
        method: 'POST',
        url,
        headers: { ...auth, 'content-type': 'application/json' },
        payload: '{"model":"alpha-pro","prompt":"a kite\\u0000 at dusk"}',
      });
      t.equal(res.statusCode, 400, url);
      t.match(res.json(), { code: 'invalid_request', errors: [{ pointer: '/prompt', code: 'invalid_format' }] }, url);
    }
    const { data } = (await app.inject({ method: 'GET', url: '/api/v1/account', headers: auth })).json();
    t.equal(data.balance, 10_000, 'nothing charged');
  },
);

t.test(
  'an estimate checks webhook_url as a create does, so it never prices a request the create refuses',
  async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const estimate = (webhook_url: string) =>
      app.inject({
        method: 'POST',
        url: ESTIMATE,
        headers: auth,
        payload: { model: 'alpha-pro', prompt: 'a kite', webhook_url },
      });
    for (const url of [
      'https://127.0.0.1/hook',
      'http://hooks.example.com/hook',
      'https://localhost/hook',
      'https://[::1]/h',
      'https://internal-name.example.org/hook',
    ]) {
      const res = await estimate(url);
      t.equal(res.statusCode, 400, url);
      t.match(res.json(), { code: 'invalid_request', errors: [{ pointer: '/webhook_url', location: 'body' }] }, url);
    }
    const fine = await estimate('https://hooks.example.com/hook');
    t.equal(fine.statusCode, 200);
    t.equal(fine.json().data.cost, 25);
  },
);

t.test('two Authorization headers are 400 invalid_request, whichever of them is valid', async (t) => {
  const { app, newAccount } = ctx();
  const { key } = await newAccount();
  const port = await loopbackPort(app);
  const request = (headers: string) =>
    rawRequest(port, `GET /api/v1/account HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}\r\n`);
  for (const headers of [
    `Authorization: Bearer ${key}\r\nAuthorization: Bearer igk_other\r\n`,
    `Authorization: Bearer igk_other\r\nauthorization: Bearer ${key}\r\n`,
    `Authorization: Bearer ${key}\r\nAuthorization: Bearer ${key}\r\n`,
  ]) {
    const res = await request(headers);
    t.equal(res?.status, 400);
    t.match(JSON.parse(res!.body), {
      code: 'invalid_request',
      errors: [{ pointer: '/authorization', location: 'header', code: 'duplicate_header' }],
    });
  }
  t.equal((await request(`Authorization: Bearer ${key}\r\n`))?.status, 200, 'one header is fine');
});

t.test("a deleted generated image leaves its task's generated list", async (t) => {
  const h = ctx();
  const { auth } = await h.newAccount();
  const created = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: auth,
    payload: { model: 'alpha-pro', prompt: 'a harbour' },
  });
  const taskId = created.json().data.task_id as string;
  await testWorker(t, h).runOnce();
  const completed = (await h.app.inject({ url: `/api/v1/images/generations/${taskId}`, headers: auth })).json().data;
  t.equal(completed.status, 'COMPLETED');
  t.equal(completed.generated.length, 1);
  const mediaId = completed.generated[0].media_id as string;

  t.equal((await h.app.inject({ method: 'DELETE', url: `/api/v1/media/${mediaId}`, headers: auth })).statusCode, 204);
  const after = (await h.app.inject({ url: `/api/v1/images/generations/${taskId}`, headers: auth })).json().data;
  t.same(after.generated, [], 'no entry left whose URL would 404');
  t.equal(after.status, 'COMPLETED');
  const listed = (await h.app.inject({ url: '/api/v1/images/generations', headers: auth })).json().data;
  t.same(listed[0].generated, []);
});

t.test('ledger entry ids are UUIDv7s, newest first, paged without gaps or repeats', async (t) => {
  const { app, store, newAccount } = ctx();
  const first = await newAccount(10);
  const second = await newAccount(10);
  for (let i = 0; i < 3; i++) {
    await store.accounts.grantTokens({ accountId: first.accountId, amount: 1, note: null, now: new Date() });
    await store.accounts.grantTokens({ accountId: second.accountId, amount: 1, note: null, now: new Date() });
  }
  for (const { auth } of [first, second]) {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: { id: string }[]; next_cursor: string | null } = (
        await app.inject({ url: `/api/v1/account/ledger?limit=3${cursor ? `&cursor=${cursor}` : ''}`, headers: auth })
      ).json();
      ids.push(...page.data.map((e) => e.id));
      cursor = page.next_cursor;
    } while (cursor);
    t.equal(ids.length, 4, 'the opening grant and three more');
    t.equal(new Set(ids).size, 4, 'no repeats');
    t.ok(
      ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)),
      'UUIDv7 (no counter that tells the volume)',
    );
    t.strictSame(ids, [...ids].sort().reverse(), 'newest first');
  }
});
