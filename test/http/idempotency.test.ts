import t from 'tap';
import { jsonRequestFingerprint } from '../../src/services/idempotency.js';
import { buildTestApp, fileTestApp } from '../helpers/app.js';
import { everyStoreFileTestApp } from '../helpers/file-apps.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { testOnEveryStore } from '../helpers/store.js';

const CREATE = '/api/v1/images/generations';
const BODY = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' }; // 25 tokens
const withKey = (auth: { authorization: string }, key: string) => ({ ...auth, 'idempotency-key': key });

const ctx = fileTestApp();
const appOn = everyStoreFileTestApp(ctx);

testOnEveryStore(
  t,
  'the same key 20 times concurrently: one task, one debit; each answer is the 202 or a 409',
  async (t, storeAdapter) => {
    const { app, store, newAccount } = await appOn(storeAdapter);
    const { accountId, auth } = await newAccount(1000);
    const headers = withKey(auth, 'order-7f3a');

    const responses = await Promise.all(
      Array.from({ length: 20 }, () => app.inject({ method: 'POST', url: CREATE, headers, payload: BODY })),
    );

    const created = responses.filter((r) => r.statusCode === 202);
    const inFlight = responses.filter((r) => r.statusCode === 409);
    t.equal(created.length + inFlight.length, 20, 'nothing but 202 and 409');
    t.ok(created.length >= 1, 'at least the first request succeeded');
    t.equal(new Set(created.map((r) => r.json().data.task_id)).size, 1, 'every 202 names the same task');
    t.equal(created.filter((r) => r.headers['idempotent-replayed'] === undefined).length, 1, 'one original');
    t.ok(
      created
        .filter((r) => r.headers['idempotent-replayed'] !== undefined)
        .every((r) => r.headers['idempotent-replayed'] === 'true'),
      'the rest are marked replays',
    );
    for (const r of inFlight) {
      t.equal(r.headers['content-type'], 'application/problem+json; charset=utf-8');
      t.equal(r.json().code, 'idempotency_in_progress');
    }

    t.equal((await store.tasks.listTasks(accountId, { limit: 100 })).items.length, 1, 'one task');
    t.same(await store.accounts.ledgerTotals(accountId), { grant: 1000, debit: 25, refund: 0 }, 'one debit');

    // Once the first has finished, every retry is a replay of it.
    const retry = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
    t.equal(retry.statusCode, 202);
    t.equal(retry.headers['idempotent-replayed'], 'true');
    t.equal(retry.json().data.task_id, created[0].json().data.task_id);
    const original = created.find((r) => r.headers['idempotent-replayed'] === undefined)!;
    t.equal(retry.payload, original.payload, 'the replay is the original 202, byte for byte');
    t.equal(retry.headers.location, original.headers.location);
    t.equal(retry.headers['content-type'], original.headers['content-type']);
    await assertLedgerInvariant(t, store, accountId);
  },
);

t.test('the same key 20 times while the first is still running: 19 get 409, then retries replay', async (t) => {
  // An app of its own: its store is held inside the create until the test opens the gate.
  const { app, store, newAccount } = await buildTestApp(t);
  const { accountId, auth } = await newAccount(1000);
  // The first request is held inside the store until the other 19 have been answered, so that they
  // certainly arrive while it is in flight.
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  const insert = store.tasks.insertTaskWithDebit.bind(store.tasks);
  store.tasks.insertTaskWithDebit = async (task, limits, completesKey) => {
    await gate;
    return insert(task, limits, completesKey);
  };
  const headers = withKey(auth, 'held-open');
  const pending = Array.from({ length: 20 }, () => app.inject({ method: 'POST', url: CREATE, headers, payload: BODY }));
  let answered = 0;
  await new Promise<void>((resolve) => pending.forEach((p) => void p.then(() => ++answered === 19 && resolve())));
  openGate();
  const responses = await Promise.all(pending);

  t.same(responses.map((r) => r.statusCode).sort(), [202, ...Array(19).fill(409)]);
  t.ok(responses.filter((r) => r.statusCode === 409).every((r) => r.json().code === 'idempotency_in_progress'));
  const original = responses.find((r) => r.statusCode === 202)!;
  const retry = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(retry.headers['idempotent-replayed'], 'true');
  t.equal(retry.json().data.task_id, original.json().data.task_id);
  t.same(await store.accounts.ledgerTotals(accountId), { grant: 1000, debit: 25, refund: 0 }, 'one debit');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a replay repeats the first status, Location and body exactly', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const headers = withKey(auth, 'a3c1e0a2-31b5-4a39-9f0e-2f0c6b2d9d11');
  const first = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(first.statusCode, 202);
  t.equal(first.headers['idempotent-replayed'], undefined, 'the original is not a replay');

  const replay = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(replay.statusCode, 202);
  t.equal(replay.headers['idempotent-replayed'], 'true');
  t.equal(replay.headers.location, first.headers.location);
  t.equal(replay.headers['content-type'], first.headers['content-type']);
  t.equal(replay.body, first.body, 'byte for byte');
  t.ok(
    replay.headers['x-request-id'] && replay.headers['x-request-id'] !== first.headers['x-request-id'],
    'each delivery has its own request id',
  );
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75, 'charged once');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('the fingerprint ignores key order and whitespace of the JSON body', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const headers = { ...withKey(auth, 'k-order'), 'content-type': 'application/json' };
  const first = await app.inject({
    method: 'POST',
    url: CREATE,
    headers,
    payload:
      '{"model":"alpha-pro","prompt":"a lighthouse at dawn","parameters":{"resolution":"1K","aspect_ratio":"1:1"}}',
  });
  const second = await app.inject({
    method: 'POST',
    url: CREATE,
    headers,
    payload:
      '{ "parameters": { "aspect_ratio": "1:1", "resolution": "1K" }, "prompt": "a lighthouse at dawn", "model": "alpha-pro" }',
  });
  t.equal(first.statusCode, 202);
  t.equal(second.statusCode, 202);
  t.equal(second.headers['idempotent-replayed'], 'true');
  t.equal(second.json().data.task_id, first.json().data.task_id);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('the same key with a different body is 422 idempotency_key_reused and creates nothing', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const headers = withKey(auth, 'reused');
  t.equal((await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY })).statusCode, 202);

  const other = await app.inject({
    method: 'POST',
    url: CREATE,
    headers,
    payload: { ...BODY, prompt: 'a different prompt' },
  });
  t.equal(other.statusCode, 422);
  t.equal(other.headers['content-type'], 'application/problem+json; charset=utf-8');
  t.equal(other.json().code, 'idempotency_key_reused');
  t.equal((await store.tasks.listTasks(accountId, { limit: 10 })).items.length, 1);
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75);

  const again = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(again.headers['idempotent-replayed'], 'true', 'the first body still replays');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('another account using the same key string gets its own task', async (t) => {
  const { app, store, newAccount } = ctx();
  const a = await newAccount(100);
  const b = await newAccount(100);
  const ra = await app.inject({ method: 'POST', url: CREATE, headers: withKey(a.auth, 'shared-key'), payload: BODY });
  const rb = await app.inject({ method: 'POST', url: CREATE, headers: withKey(b.auth, 'shared-key'), payload: BODY });
  t.equal(ra.statusCode, 202);
  t.equal(rb.statusCode, 202);
  t.equal(rb.headers['idempotent-replayed'], undefined, 'not a replay of the other account');
  t.not(rb.json().data.task_id, ra.json().data.task_id);
  t.ok(await store.tasks.getTask(b.accountId, rb.json().data.task_id), 'the task belongs to b');

  const rb2 = await app.inject({
    method: 'POST',
    url: CREATE,
    headers: withKey(b.auth, 'shared-key'),
    payload: { ...BODY, prompt: 'something else' },
  });
  t.equal(rb2.statusCode, 422, "b's key is bound to b's body");
  for (const { accountId } of [a, b]) {
    t.equal((await store.accounts.getAccount(accountId))!.balance, 75);
    await assertLedgerInvariant(t, store, accountId);
  }
});

t.test('without the header nothing is deduplicated', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const first = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  const second = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  t.not(first.json().data.task_id, second.json().data.task_id);
  t.equal((await store.accounts.getAccount(accountId))!.balance, 50);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('an error before any change (402) is not stored: the same key succeeds once the balance allows', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(10);
  const headers = withKey(auth, 'retry-after-topup');
  const short = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(short.statusCode, 402);

  await store.accounts.grantTokens({ accountId, amount: 90, note: null, now: new Date() });
  const retry = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(retry.statusCode, 202);
  t.equal(retry.headers['idempotent-replayed'], undefined, 'ran afresh');
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a validation error takes no key: the corrected request may use it', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const headers = withKey(auth, 'fix-and-retry');
  const bad = await app.inject({ method: 'POST', url: CREATE, headers, payload: { ...BODY, prompt: 'x' } });
  t.equal(bad.statusCode, 400);
  const good = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(good.statusCode, 202);
  t.equal(good.headers['idempotent-replayed'], undefined);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a 5xx releases the key so that the retry runs', async (t) => {
  // An app of its own: a fault is injected into its store.
  const { app, store, newAccount } = await buildTestApp(t);
  const { accountId, auth } = await newAccount(100);
  const original = store.tasks.insertTaskWithDebit.bind(store.tasks);
  let failNext = true;
  store.tasks.insertTaskWithDebit = async (task, limits) => {
    if (failNext) {
      failNext = false;
      throw new Error('disk on fire');
    }
    return original(task, limits);
  };
  const headers = withKey(auth, 'server-error');
  const failed = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(failed.statusCode, 500);
  t.notMatch(failed.body, /disk on fire/, 'no internals leak');
  const retry = await app.inject({ method: 'POST', url: CREATE, headers, payload: BODY });
  t.equal(retry.statusCode, 202);
  t.equal(retry.headers['idempotent-replayed'], undefined);
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a key held by a live request is 409; one abandoned past its lease is taken over', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const fingerprint = jsonRequestFingerprint('POST', CREATE, BODY);
  const hold = (key: string, at: number) =>
    store.idempotencyKeys.claimIdempotencyKey({
      accountId,
      key,
      fingerprint,
      leaseToken: `crashed-${key}`,
      now: new Date(at),
      leaseMs: 60_000,
      ttlMs: 86_400_000,
    });

  await hold('live', Date.now());
  const busy = await app.inject({ method: 'POST', url: CREATE, headers: withKey(auth, 'live'), payload: BODY });
  t.equal(busy.statusCode, 409);
  t.equal(busy.json().code, 'idempotency_in_progress');
  t.equal(busy.headers['retry-after'], '1', 'told to retry shortly');

  await hold('abandoned', Date.now() - 61_000);
  const takeover = await app.inject({
    method: 'POST',
    url: CREATE,
    headers: withKey(auth, 'abandoned'),
    payload: BODY,
  });
  t.equal(takeover.statusCode, 202, 'the process that held it is presumed dead');
  const replay = await app.inject({ method: 'POST', url: CREATE, headers: withKey(auth, 'abandoned'), payload: BODY });
  t.equal(replay.headers['idempotent-replayed'], 'true');
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75);
  await assertLedgerInvariant(t, store, accountId);
});

t.test('a malformed key is a 400 pointing at the header', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  const cases: [string, string][] = [
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a tab', 'abc\tdef'],
  ];
  for (const [name, key] of cases) {
    const res = await app.inject({ method: 'POST', url: CREATE, headers: withKey(auth, key), payload: BODY });
    t.equal(res.statusCode, 400, name);
    t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8', name);
    t.match(
      res.json(),
      { code: 'invalid_request', errors: [{ location: 'header', pointer: '/idempotency-key' }] },
      name,
    );
  }
  const longest = await app.inject({
    method: 'POST',
    url: CREATE,
    headers: withKey(auth, 'k'.repeat(255)),
    payload: BODY,
  });
  t.equal(longest.statusCode, 202, '255 characters are fine');
  t.equal((await store.accounts.getAccount(accountId))!.balance, 75, 'only the valid request was charged');
  await assertLedgerInvariant(t, store, accountId);
});

t.test('the Idempotency-Key header is documented on create', async (t) => {
  const { app } = ctx();
  const res = await app.inject({ method: 'GET', url: '/openapi.json' });
  const create = res.json().paths['/api/v1/images/generations'].post;
  t.match(create.parameters, [{ in: 'header', name: 'idempotency-key', required: false, schema: { maxLength: 255 } }]);
});

testOnEveryStore(
  t,
  'cancel with an Idempotency-Key: a retry replays the 200 rather than a 409, and refunds nothing more',
  async (t, storeAdapter) => {
    const { app, store, newAccount } = await appOn(storeAdapter);
    const { accountId, auth } = await newAccount(1000);
    const created = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
    const cancelUrl = `${created.headers.location}/cancel`;
    const cancel = (key: string, url = cancelUrl) => app.inject({ method: 'POST', url, headers: withKey(auth, key) });

    const first = await cancel('cancel-1');
    t.equal(first.statusCode, 200);
    t.equal(first.json().data.status, 'CANCELED');
    t.equal(first.headers['idempotent-replayed'], undefined);
    const retry = await cancel('cancel-1');
    t.equal(retry.statusCode, 200, 'the retry is the first answer, not 409 invalid_state');
    t.equal(retry.headers['idempotent-replayed'], 'true');
    t.equal(retry.payload, first.payload, 'byte for byte');
    const withoutKey = await app.inject({ method: 'POST', url: cancelUrl, headers: auth });
    t.equal(withoutKey.statusCode, 409, 'without the key a second cancel is still refused');
    t.equal(withoutKey.json().code, 'invalid_state');

    const other = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
    const reused = await cancel('cancel-1', `${other.headers.location}/cancel`);
    t.equal(reused.statusCode, 422, 'the key of one cancel cannot cancel another task');
    t.equal(reused.json().code, 'idempotency_key_reused');
    t.same(await store.accounts.ledgerTotals(accountId), { grant: 1000, debit: 50, refund: 25 }, 'one refund');
    await assertLedgerInvariant(t, store, accountId);
  },
);

t.test('a refused cancel (409) does not keep its Idempotency-Key: a later retry runs again', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(1000);
  const created = await app.inject({ method: 'POST', url: CREATE, headers: auth, payload: BODY });
  const cancelUrl = `${created.headers.location}/cancel`;
  t.equal((await app.inject({ method: 'POST', url: cancelUrl, headers: auth })).statusCode, 200);
  for (let i = 0; i < 2; i++) {
    const refused = await app.inject({ method: 'POST', url: cancelUrl, headers: withKey(auth, 'late') });
    t.equal(refused.statusCode, 409);
    t.equal(refused.json().code, 'invalid_state');
    t.equal(refused.headers['idempotent-replayed'], undefined, 'an error is never replayed');
  }
});
