import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Test } from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { createTask, type TaskStatus } from '../../src/core/task.js';
import { API_KEY_CACHE_TTL_MS } from '../../src/services/api-keys.js';
import { newIdAt } from '../../src/ids.js';
import type { Store } from '../../src/store/port.js';
import { fileTestApp } from '../helpers/app.js';

const TASKS = '/api/v1/images/generations';
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const PROBLEM_JSON = /^application\/problem\+json/;

const ctx = fileTestApp();
/**
 * The clock of the tests that need one: it stands still unless a test moves it, so that two
 * requests of a test are presented at one instant; every test reads it relative to its value.
 */
let clockAt = Date.now();
const clocked = fileTestApp({}, { now: () => new Date(clockAt) });

type Auth = { authorization: string };

const createBody = (overrides: Record<string, unknown> = {}) => ({
  model: 'alpha-pro',
  prompt: 'a quiet harbour',
  ...overrides,
});

async function createTaskVia(app: FastifyInstance, auth: Auth, overrides: Record<string, unknown> = {}) {
  const res = await app.inject({ method: 'POST', url: TASKS, headers: auth, payload: createBody(overrides) });
  if (res.statusCode !== 202) throw new Error(`create failed: ${res.statusCode} ${res.body}`);
  return res.json().data;
}

const get = (app: FastifyInstance, url: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url, headers });

function assertProblem(t: Test, res: LightMyRequestResponse, status: number, code: string): any {
  t.equal(res.statusCode, status, `status ${status}`);
  t.match(res.headers['content-type'], PROBLEM_JSON, 'problem+json');
  const body = res.json();
  t.equal(body.status, status);
  t.equal(body.code, code, `code ${code}`);
  t.type(body.type, 'string');
  t.type(body.title, 'string');
  t.type(body.detail, 'string');
  t.equal(body.request_id, res.headers['x-request-id'], 'request_id matches x-request-id');
  return body;
}

/**
 * Stores a task created at `at` straight through the store, so that creation times (and thus
 * time filters) are decided by the test rather than by how fast it runs. The store port has no
 * way to move a task yet, so a task in another state is inserted as such.
 */
async function seedTask(
  store: Store,
  accountId: string,
  at: Date,
  request: { model?: 'alpha-pro' | 'beta-v5-pro'; status?: TaskStatus } = {},
): Promise<string> {
  const task = createTask(
    { model: request.model ?? 'alpha-pro', prompt: 'seeded task' },
    { accountId, now: at, newId: () => newIdAt(at) },
  );
  const status = request.status ?? 'CREATED';
  const finished = status === 'CREATED' ? {} : { status, startedAt: at, completedAt: at };
  await store.tasks.insertTaskWithDebit({ ...task, ...finished }, { maxActiveTasks: 1000 });
  return task.id;
}

// ── creation and reading ────────────────────────────────────────────────────────────────────────

t.test('create answers 202 with Location and a CREATED task', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const before = Date.now();
  const res = await app.inject({
    method: 'POST',
    url: TASKS,
    headers: auth,
    payload: createBody({ model: 'beta-v5-pro', parameters: { aspect_ratio: '16:9', resolution: '2K' } }),
  });
  const after = Date.now();
  t.equal(res.statusCode, 202);
  t.match(res.headers['content-type'], /^application\/json/);
  const task = res.json().data;
  t.match(task.task_id, UUID_V7, 'task_id is a UUIDv7');
  t.equal(res.headers.location, `/api/v1/images/generations/${task.task_id}`);
  t.equal(task.status, 'CREATED');
  t.equal(task.cost, 50);
  t.strictSame(task.generated, []);
  t.equal(task.model, 'beta-v5-pro');
  t.equal(task.prompt, 'a quiet harbour');
  t.strictSame(task.image_reference, []);
  t.strictSame(task.parameters, {
    aspect_ratio: '16:9',
    resolution: '2K',
    output_format: 'png',
    output_compression: null,
    seed: task.parameters.seed,
  });
  t.ok(Number.isInteger(task.parameters.seed), 'a seed was drawn and recorded');
  t.equal(task.webhook_url, null);
  t.equal(task.error, null);
  t.match(task.created_at, RFC3339, 'created_at is RFC 3339');
  const createdAt = Date.parse(task.created_at);
  t.ok(createdAt >= before - 1 && createdAt <= after + 1, 'created_at is the time of the request');
  t.equal(task.started_at, null);
  t.equal(task.completed_at, null);
  t.strictSame(Object.keys(task).sort(), [
    'completed_at',
    'cost',
    'created_at',
    'error',
    'generated',
    'image_reference',
    'model',
    'parameters',
    'prompt',
    'started_at',
    'status',
    'stream_url',
    'stream_url_expires_at',
    'task_id',
    'webhook_url',
  ]);
});

t.test('the UUIDv7 task id carries the creation millisecond', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const task = await createTaskVia(app, auth);
  const millis = parseInt(task.task_id.replace(/-/g, '').slice(0, 12), 16);
  t.equal(new Date(millis).toISOString(), task.created_at);
});

t.test('GET returns the same task as the create response', async (t) => {
  // One instant for both requests: the task's signed stream URL expires at a whole minute after
  // the moment it is presented, so a create and a GET on either side of a minute's turn would
  // rightly carry two different URLs (a CI run once met that turn). The clocked app's stands still.
  const { app, newAccount } = clocked();
  const { auth } = await newAccount();
  const created = await app.inject({ method: 'POST', url: TASKS, headers: auth, payload: createBody() });
  const res = await get(app, created.headers.location as string, auth);
  t.equal(res.statusCode, 200);
  t.strictSame(res.json(), created.json());
});

t.test('create debits the cost from the balance', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  await createTaskVia(app, auth, { parameters: { resolution: '4K' } });
  t.equal((await store.accounts.getAccount(accountId))?.balance, 50);
});

t.test('a refused create (402) carries no Location, with or without an Idempotency-Key', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount(10);
  for (const headers of [auth, { ...auth, 'idempotency-key': 'refused-create' }]) {
    const res = await app.inject({ method: 'POST', url: TASKS, headers, payload: createBody() });
    t.equal(res.statusCode, 402);
    t.equal(res.json().code, 'insufficient_tokens');
    t.equal(res.headers.location, undefined, 'no Location to a task that was never stored');
  }
});

// ── request ids ─────────────────────────────────────────────────────────────────────────────────

t.test('every response carries an x-request-id', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const created = await app.inject({ method: 'POST', url: TASKS, headers: auth, payload: createBody() });
  const responses: [string, LightMyRequestResponse][] = [
    ['202 create', created],
    ['200 read', await get(app, created.headers.location as string, auth)],
    ['200 list', await get(app, TASKS, auth)],
    ['200 healthz', await get(app, '/healthz')],
    ['400 bad body', await app.inject({ method: 'POST', url: TASKS, headers: auth, payload: { model: 'alpha-pro' } })],
    ['401 no key', await get(app, TASKS)],
    ['404 unknown task', await get(app, `${TASKS}/01890a5d-ac96-774b-bcce-b302099a8057`, auth)],
    ['404 unknown route', await get(app, '/nowhere')],
  ];
  const ids = new Set<string>();
  for (const [label, res] of responses) {
    const id = res.headers['x-request-id'];
    t.type(id, 'string', label);
    t.ok(String(id).length > 0, label);
    ids.add(String(id));
  }
  t.equal(ids.size, responses.length, 'each request gets its own id');
});

t.test('a caller-supplied x-request-id is echoed, also into problem bodies', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const ok = await get(app, TASKS, { ...auth, 'x-request-id': 'client-req-42' });
  t.equal(ok.headers['x-request-id'], 'client-req-42');
  const problem = await get(app, `${TASKS}/not-a-uuid`, { ...auth, 'x-request-id': 'client-req-43' });
  t.equal(problem.headers['x-request-id'], 'client-req-43');
  t.equal(problem.json().request_id, 'client-req-43');
});

for (const given of ['has space', 'x'.repeat(129), 'semi;colon']) {
  t.test(`a malformed x-request-id ${JSON.stringify(given.slice(0, 12))} is replaced, not echoed`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const res = await get(app, TASKS, { ...auth, 'x-request-id': given });
    t.equal(res.statusCode, 200);
    t.type(res.headers['x-request-id'], 'string');
    t.not(res.headers['x-request-id'], given);
    t.ok(String(res.headers['x-request-id']).length > 0);
  });
}

// ── authentication ──────────────────────────────────────────────────────────────────────────────

const unknownWellFormedKey = () => `igk_${randomBytes(32).toString('base64url')}`;

const unauthorizedCases: [string, () => Record<string, string>][] = [
  ['a missing Authorization header', () => ({})],
  ['Basic credentials', () => ({ authorization: 'Basic dXNlcjpwYXNzd29yZA==' })],
  ['an empty Bearer', () => ({ authorization: 'Bearer' })],
  ['Bearer with garbage', () => ({ authorization: 'Bearer not-a-key' })],
  ['a key without its scheme', () => ({ authorization: unknownWellFormedKey() })],
  ['a well-formed but unknown key', () => ({ authorization: `Bearer ${unknownWellFormedKey()}` })],
];

/** A client address of each failing test's own: failed authentications are budgeted per address. */
let clients = 0;
const ownClientAddress = () => `198.18.0.${++clients}`;

for (const [label, headers] of unauthorizedCases) {
  for (const [method, url] of [
    ['GET', TASKS],
    ['POST', TASKS],
    ['GET', '/api/v1/models'],
  ] as const) {
    t.test(`${method} ${url} with ${label} is 401`, async (t) => {
      const { app } = ctx();
      const res = await app.inject({
        method,
        url,
        headers: headers(),
        remoteAddress: ownClientAddress(),
        ...(method === 'POST' ? { payload: createBody() } : {}),
      });
      assertProblem(t, res, 401, 'unauthorized');
      t.equal(res.headers['www-authenticate'], 'Bearer');
    });
  }
}

t.test('the unknown well-formed key really is the key format', async (t) => {
  t.match(unknownWellFormedKey(), /^igk_[A-Za-z0-9_-]{43}$/);
});

t.test('a revoked key is 401 within the key cache TTL (at most a second)', async (t) => {
  const { app, store, newAccount } = clocked();
  const { key, auth } = await newAccount();
  t.equal((await get(app, TASKS, auth)).statusCode, 200, 'works before revocation');
  t.ok(await store.accounts.revokeApiKey(key.slice(0, 12), new Date(clockAt)), 'revoked by prefix');
  clockAt += API_KEY_CACHE_TTL_MS;
  const res = await get(app, TASKS, auth);
  assertProblem(t, res, 401, 'unauthorized');
  t.equal(res.headers['www-authenticate'], 'Bearer');
});

t.test('a create with a bad key creates nothing', async (t) => {
  const { app, store, newAccount } = ctx();
  const { accountId, auth } = await newAccount(100);
  await app.inject({
    method: 'POST',
    url: TASKS,
    remoteAddress: ownClientAddress(),
    headers: { authorization: `Bearer ${unknownWellFormedKey()}` },
    payload: createBody(),
  });
  t.equal((await store.accounts.getAccount(accountId))?.balance, 100);
  t.strictSame((await get(app, TASKS, auth)).json().data, []);
});

// ── ownership ───────────────────────────────────────────────────────────────────────────────────

t.test("account B gets 404 on account A's task", async (t) => {
  const { app, newAccount } = ctx();
  const a = await newAccount();
  const b = await newAccount();
  const task = await createTaskVia(app, a.auth);
  assertProblem(t, await get(app, `${TASKS}/${task.task_id}`, b.auth), 404, 'not_found');
  t.equal((await get(app, `${TASKS}/${task.task_id}`, a.auth)).statusCode, 200, 'the owner still reads it');
});

t.test("account B's list holds none of account A's tasks", async (t) => {
  const { app, newAccount } = ctx();
  const a = await newAccount();
  const b = await newAccount();
  await createTaskVia(app, a.auth);
  await createTaskVia(app, a.auth);
  const own = await createTaskVia(app, b.auth);
  const res = await get(app, TASKS, b.auth);
  t.equal(res.statusCode, 200);
  t.strictSame(
    res.json().data.map((task: { task_id: string }) => task.task_id),
    [own.task_id],
  );
});

t.test('a cross-account 404 looks exactly like an unknown id', async (t) => {
  const { app, newAccount } = ctx();
  const a = await newAccount();
  const b = await newAccount();
  const task = await createTaskVia(app, a.auth);
  const foreign = assertProblem(t, await get(app, `${TASKS}/${task.task_id}`, b.auth), 404, 'not_found');
  const unknown = assertProblem(
    t,
    await get(app, `${TASKS}/01890a5d-ac96-774b-bcce-b302099a8057`, b.auth),
    404,
    'not_found',
  );
  t.equal(foreign.detail, unknown.detail);
  t.equal(foreign.title, unknown.title);
});

// ── reading one task: bad ids ───────────────────────────────────────────────────────────────────

t.test('an unknown task id (valid UUID) is 404 not_found', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  assertProblem(t, await get(app, `${TASKS}/01890a5d-ac96-774b-bcce-b302099a8057`, auth), 404, 'not_found');
});

for (const bad of ['not-a-uuid', '12345', '01890a5d-ac96-774b-bcce-b302099a805z']) {
  t.test(`a malformed task id ${bad} is 400 in the path`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const body = assertProblem(t, await get(app, `${TASKS}/${bad}`, auth), 400, 'invalid_request');
    t.equal(body.errors?.[0]?.location, 'path');
    t.equal(body.errors?.[0]?.pointer, '/task_id');
  });
}

// ── listing ─────────────────────────────────────────────────────────────────────────────────────

const ids = (res: LightMyRequestResponse): string[] => res.json().data.map((task: { task_id: string }) => task.task_id);

/** The file's app (or the clocked one) with an account of the test's own, for the list tests. */
async function listFixture(testApp = ctx()) {
  const { accountId, auth } = await testApp.newAccount(100_000);
  return { ...testApp, accountId, auth };
}

/** Creates `count` tasks through the API, one after the other; returns their ids oldest first. */
async function createMany(
  app: FastifyInstance,
  auth: Auth,
  count: number,
  overrides: (i: number) => Record<string, unknown> = () => ({}),
) {
  const created: string[] = [];
  for (let i = 0; i < count; i++) created.push((await createTaskVia(app, auth, overrides(i))).task_id);
  return created;
}

const START = new Date('2030-03-01T10:00:00.000Z');
const minuteAt = (i: number) => new Date(START.getTime() + i * 60_000);
const minute = (i: number) => minuteAt(i).toISOString();

/** Seeds `count` tasks one minute apart from START; returns their ids oldest first. */
async function seedMinutes(store: Store, accountId: string, count: number) {
  const created: string[] = [];
  for (let i = 0; i < count; i++) created.push(await seedTask(store, accountId, minuteAt(i)));
  return created;
}

t.test('list is newest first with a default page of 20', async (t) => {
  const { app, auth } = await listFixture();
  const created = await createMany(app, auth, 22);
  const res = await get(app, TASKS, auth);
  t.equal(res.statusCode, 200);
  t.strictSame(ids(res), created.slice().reverse().slice(0, 20));
  t.type(res.json().next_cursor, 'string');
});

t.test('list items are the same task resources as GET returns', async (t) => {
  // One instant for both reads: their signed stream URLs would differ across a minute's turn.
  const { app, auth } = await listFixture(clocked());
  const [id] = await createMany(app, auth, 1);
  const one = await get(app, `${TASKS}/${id}`, auth);
  t.strictSame((await get(app, TASKS, auth)).json().data, [one.json().data]);
});

t.test('an empty list is data [] and next_cursor null', async (t) => {
  const { app, auth } = await listFixture();
  const res = await get(app, TASKS, auth);
  t.equal(res.statusCode, 200);
  t.strictSame(res.json(), { data: [], next_cursor: null });
});

t.test('paging 25 tasks by 10 gives 10, 10, 5 with no duplicates', async (t) => {
  const { app, auth } = await listFixture();
  const created = await createMany(app, auth, 25);
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const res = await get(app, `${TASKS}?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, auth);
    t.equal(res.statusCode, 200);
    pages.push(ids(res));
    cursor = res.json().next_cursor;
  } while (cursor !== null && pages.length < 10);
  t.strictSame(
    pages.map((p) => p.length),
    [10, 10, 5],
  );
  const all = pages.flat();
  t.equal(new Set(all).size, 25, 'no duplicates');
  t.strictSame(all, created.slice().reverse(), 'every task once, newest first');
});

t.test('paging tasks seeded a minute apart follows creation time', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const created = await seedMinutes(store, accountId, 7);
  const first = await get(app, `${TASKS}?limit=4`, auth);
  const second = await get(app, `${TASKS}?limit=4&cursor=${encodeURIComponent(first.json().next_cursor)}`, auth);
  t.strictSame([...ids(first), ...ids(second)], created.slice().reverse());
  t.equal(second.json().next_cursor, null);
});

t.test('a page that ends exactly at the last task has next_cursor null', async (t) => {
  const { app, auth } = await listFixture();
  await createMany(app, auth, 10);
  const first = await get(app, `${TASKS}?limit=5`, auth);
  const second = await get(app, `${TASKS}?limit=5&cursor=${encodeURIComponent(first.json().next_cursor)}`, auth);
  t.equal(ids(second).length, 5);
  t.equal(second.json().next_cursor, null);
});

t.test('filter by status', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const waiting = [await seedTask(store, accountId, minuteAt(0)), await seedTask(store, accountId, minuteAt(1))];
  const done = await seedTask(store, accountId, minuteAt(2), { status: 'COMPLETED' });
  const failed = await seedTask(store, accountId, minuteAt(3), { status: 'FAILED' });
  t.strictSame(ids(await get(app, `${TASKS}?status=CREATED`, auth)), waiting.slice().reverse());
  t.strictSame(ids(await get(app, `${TASKS}?status=COMPLETED`, auth)), [done]);
  t.strictSame(ids(await get(app, `${TASKS}?status=FAILED`, auth)), [failed]);
  t.strictSame(ids(await get(app, `${TASKS}?status=CANCELED`, auth)), []);
});

t.test('filter by model', async (t) => {
  const { app, auth } = await listFixture();
  const created = await createMany(app, auth, 6, (i) => ({ model: i % 2 === 0 ? 'alpha-pro' : 'beta-v5-pro' }));
  t.strictSame(ids(await get(app, `${TASKS}?model=beta-v5-pro`, auth)), [created[5], created[3], created[1]]);
  t.strictSame(ids(await get(app, `${TASKS}?model=alpha-pro`, auth)), [created[4], created[2], created[0]]);
});

t.test('filter by created_after is strictly after', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const created = await seedMinutes(store, accountId, 5);
  t.strictSame(ids(await get(app, `${TASKS}?created_after=${minute(2)}`, auth)), [created[4], created[3]]);
});

t.test('filter by created_before is strictly before', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const created = await seedMinutes(store, accountId, 5);
  t.strictSame(ids(await get(app, `${TASKS}?created_before=${minute(2)}`, auth)), [created[1], created[0]]);
});

t.test('created_after and created_before together select a window', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const created = await seedMinutes(store, accountId, 5);
  t.strictSame(ids(await get(app, `${TASKS}?created_after=${minute(0)}&created_before=${minute(4)}`, auth)), [
    created[3],
    created[2],
    created[1],
  ]);
});

t.test('a time filter with an offset means the same instant', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const created = await seedMinutes(store, accountId, 5);
  // 10:02Z written as 12:02+02:00
  const res = await get(app, `${TASKS}?created_after=${encodeURIComponent('2030-03-01T12:02:00+02:00')}`, auth);
  t.strictSame(ids(res), [created[4], created[3]]);
});

t.test('a time filter one millisecond off the creation time', async (t) => {
  const { app, store, accountId, auth } = await listFixture();
  const [only] = await seedMinutes(store, accountId, 1);
  const justBefore = new Date(START.getTime() - 1).toISOString();
  const justAfter = new Date(START.getTime() + 1).toISOString();
  t.strictSame(ids(await get(app, `${TASKS}?created_after=${justBefore}`, auth)), [only]);
  t.strictSame(ids(await get(app, `${TASKS}?created_before=${justAfter}`, auth)), [only]);
  t.strictSame(ids(await get(app, `${TASKS}?created_after=${justAfter}`, auth)), []);
  t.strictSame(ids(await get(app, `${TASKS}?created_before=${justBefore}`, auth)), []);
});

t.test('filters combine with paging', async (t) => {
  const { app, auth } = await listFixture();
  const created = await createMany(app, auth, 9, (i) => ({ model: i % 3 === 0 ? 'beta-v5-pro' : 'alpha-pro' }));
  const first = await get(app, `${TASKS}?model=alpha-pro&limit=4`, auth);
  const second = await get(
    app,
    `${TASKS}?model=alpha-pro&limit=4&cursor=${encodeURIComponent(first.json().next_cursor)}`,
    auth,
  );
  t.strictSame(ids(first), [created[8], created[7], created[5], created[4]]);
  t.strictSame(ids(second), [created[2], created[1]]);
  t.equal(second.json().next_cursor, null);
});

for (const limit of ['0', '101', 'abc', '-1', '1.5']) {
  t.test(`limit=${limit} is 400 in the query`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const body = assertProblem(t, await get(app, `${TASKS}?limit=${limit}`, auth), 400, 'invalid_request');
    t.equal(body.errors?.[0]?.location, 'query');
    t.equal(body.errors?.[0]?.pointer, '/limit');
  });
}

const badQueries: [string, string][] = [
  ['status=DONE', '/status'],
  ['model=gamma-1', '/model'],
  ['created_after=yesterday', '/created_after'],
  ['created_before=2030-13-01T00:00:00Z', '/created_before'],
  ['sort=asc', '/sort'],
];
for (const [query, pointer] of badQueries) {
  t.test(`?${query} is 400 in the query`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const body = assertProblem(t, await get(app, `${TASKS}?${query}`, auth), 400, 'invalid_request');
    t.equal(body.errors?.[0]?.location, 'query');
    t.equal(body.errors?.[0]?.pointer, pointer);
  });
}

for (const cursor of ['zzzz', 'not a cursor', '!!!', 'x'.repeat(201)]) {
  t.test(`a bad cursor ${JSON.stringify(cursor.slice(0, 12))} is 400`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    const body = assertProblem(
      t,
      await get(app, `${TASKS}?cursor=${encodeURIComponent(cursor)}`, auth),
      400,
      'invalid_request',
    );
    t.equal(body.errors?.[0]?.location, 'query');
    t.equal(body.errors?.[0]?.pointer, '/cursor');
  });
}

// ── models ──────────────────────────────────────────────────────────────────────────────────────

/** docs/design.md §3.2, a few rows: [model, ratio, resolution, width, height]. */
const PIXEL_ROWS: [string, string, string, number, number][] = [
  ['alpha-pro', '1:1', '1K', 1024, 1024],
  ['alpha-pro', '4:5', '2K', 1856, 2304],
  ['alpha-pro', '5:4', '1K', 1152, 928],
  ['alpha-pro', '21:9', '4K', 6336, 2688],
  ['alpha-pro', '9:16', '4K', 3072, 5504],
  ['beta-v5-pro', '16:9', '2K', 2752, 1536],
  ['beta-v5-pro', '2:3', '1K', 848, 1264],
  ['beta-v5-pro', '3:4', '2K', 1792, 2400],
];

t.test('GET /api/v1/models lists both models with the seed limits and prices', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const res = await get(app, '/api/v1/models', auth);
  t.equal(res.statusCode, 200);
  const models = res.json().data as any[];
  t.strictSame(models.map((m) => m.id).sort(), ['alpha-pro', 'beta-v5-pro']);
  const alpha = models.find((m) => m.id === 'alpha-pro');
  const beta = models.find((m) => m.id === 'beta-v5-pro');
  t.strictSame(alpha.prompt_length, { min: 3, max: 10000 });
  t.strictSame(alpha.image_reference_count, { min: 1, max: 8 });
  t.strictSame(alpha.prices, { '1K': 25, '2K': 25, '4K': 50 });
  t.strictSame(alpha.defaults, { aspect_ratio: '1:1', resolution: '1K' });
  t.strictSame(
    [...alpha.aspect_ratios].sort(),
    ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'].sort(),
  );
  t.strictSame(beta.prompt_length, { min: 3, max: 5000 });
  t.strictSame(beta.image_reference_count, { min: 1, max: 10 });
  t.strictSame(beta.prices, { '1K': 25, '2K': 50 });
  t.strictSame(beta.defaults, { aspect_ratio: '1:1', resolution: '1K' });
  t.strictSame([...beta.aspect_ratios].sort(), ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'].sort());
});

t.test('GET /api/v1/models publishes the docs/design.md §3.2 pixel sizes', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const models = get(app, '/api/v1/models', auth).then((r) => r.json().data as any[]);
  for (const [id, ratio, resolution, width, height] of PIXEL_ROWS) {
    const model = (await models).find((m) => m.id === id);
    t.strictSame(model.pixel_sizes[ratio][resolution], { width, height }, `${id} ${ratio} ${resolution}`);
  }
});

t.test('beta-v5-pro publishes no 4K and no 4:5 or 5:4 sizes', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const res = await get(app, '/api/v1/models/beta-v5-pro', auth);
  t.equal(res.statusCode, 200);
  const beta = res.json().data;
  t.strictSame(beta.resolutions, ['1K', '2K']);
  t.notOk('4:5' in beta.pixel_sizes);
  t.notOk('5:4' in beta.pixel_sizes);
  t.strictSame(Object.keys(beta.pixel_sizes['1:1']).sort(), ['1K', '2K']);
});

t.test('GET /api/v1/models/alpha-pro is the same entry as in the list', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const list = (await get(app, '/api/v1/models', auth)).json().data as any[];
  const one = await get(app, '/api/v1/models/alpha-pro', auth);
  t.equal(one.statusCode, 200);
  t.strictSame(
    one.json().data,
    list.find((m) => m.id === 'alpha-pro'),
  );
});

t.test('GET /api/v1/models/nope is 404 not_found', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  assertProblem(t, await get(app, '/api/v1/models/nope', auth), 404, 'not_found');
});

// ── operations and unknown routes ───────────────────────────────────────────────────────────────

t.test('/healthz answers 200 without a key', async (t) => {
  const { app } = ctx();
  const res = await get(app, '/healthz');
  t.equal(res.statusCode, 200);
  t.equal(res.json().status, 'ok');
});

for (const [method, url] of [
  ['GET', '/nowhere'],
  ['GET', '/api/v1/nowhere'],
  ['POST', '/api/v1/images'],
] as const) {
  t.test(`${method} ${url} is a 404 problem`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    assertProblem(t, await app.inject({ method, url, headers: auth }), 404, 'not_found');
  });
}

t.test(`DELETE ${TASKS}, a method the path does not take, is a 405 problem with Allow`, async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const res = await app.inject({ method: 'DELETE', url: TASKS, headers: auth });
  assertProblem(t, res, 405, 'method_not_allowed');
  t.equal(res.headers.allow, 'GET, HEAD, POST');
});
