import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateImage } from 'ai';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import t, { type Test } from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { workerBackends } from '../../src/worker/build-worker.js';
import { buildTestApp, fileTestApp, type TestApp } from '../helpers/app.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { FakeUpstream } from '../helpers/fake-upstream.js';
import { encodedImage } from '../helpers/images.js';
import { freePort } from '../helpers/processes.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { geminiReply } from '../helpers/provider-replies.js';
import { ScriptedGenerator, testWorker } from '../helpers/worker.js';
import { GenerationError, type ImageGenerator } from '../../src/generators/port.js';

/**
 * The OpenAI Images face (/v1, decision 0025) driven by the real clients, each given only a base
 * URL and a key: the official `openai` SDK and the AI SDK's `generateImage` through
 * `@ai-sdk/openai-compatible`. The app listens on loopback with an in-process worker.
 */

interface SetupOptions {
  env?: Record<string, string>;
  /** Start the worker at once (default); false: the test starts it. */
  startWorker?: boolean;
  /** One generator for every model (one slot) instead of the configured backends. */
  generator?: ImageGenerator;
}

/** An account of `tokens` on `harness`, with both clients given its key. */
async function clientsOf(harness: TestApp, baseURL: string, tokens: number) {
  const account = await harness.newAccount(tokens);
  return {
    ...harness,
    ...account,
    baseURL,
    openai: new OpenAI({ baseURL, apiKey: account.key }),
    aiSdk: createOpenAICompatible({ name: 'imagegen', baseURL, apiKey: account.key }),
  };
}

// One app for the file, listening with its worker running; each test has its own account. A test
// that needs other configuration, another generator or a worker it starts itself has its own (setup).
const filePort = await freePort();
const fileEvents = new TaskEvents();
const fileApp = fileTestApp({ PUBLIC_BASE_URL: `http://127.0.0.1:${filePort}` }, { events: fileEvents });
t.before(async () => {
  const harness = fileApp();
  testWorker(t, harness, {
    events: fileEvents,
    backends: workerBackends(harness.config, 2),
    generationTimeoutMs: harness.config.GENERATION_TIMEOUT_MS,
    maxAttempts: harness.config.TASK_MAX_ATTEMPTS,
  }).start();
  await harness.app.listen({ host: '127.0.0.1', port: filePort });
});

/** A new account on the file's app. */
function shared(tokens = 1000) {
  return clientsOf(fileApp(), `http://127.0.0.1:${filePort}/v1`, tokens);
}

async function setup(t: Test, options: SetupOptions = {}) {
  const port = await freePort();
  const events = new TaskEvents();
  const harness = await buildTestApp(t, { PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, ...options.env }, { events });
  const worker = testWorker(t, harness, {
    events,
    ...(options.generator ? { generator: options.generator } : { backends: workerBackends(harness.config, 2) }),
    generationTimeoutMs: harness.config.GENERATION_TIMEOUT_MS,
    maxAttempts: harness.config.TASK_MAX_ATTEMPTS,
  });
  if (options.startWorker !== false) worker.start();
  await harness.app.listen({ host: '127.0.0.1', port });
  return { ...(await clientsOf(harness, `http://127.0.0.1:${port}/v1`, 1000)), worker };
}

type Harness = Awaited<ReturnType<typeof clientsOf>>;

async function pixelsOf(bytes: Uint8Array | Buffer) {
  const { format, width, height } = await sharp(bytes).metadata();
  return { format, width, height };
}

const decoded = (b64: string | undefined) => pixelsOf(Buffer.from(b64 ?? '', 'base64'));

async function debitsOf(h: Harness) {
  return (await h.store.accounts.ledgerTotals(h.accountId)).debit;
}

async function tasksOf(h: Harness) {
  return (await h.store.tasks.listTasks(h.accountId, { limit: 100 })).items;
}

t.test('openai SDK: images.generate answers b64_json at the exact catalog size, one task charged', async (t) => {
  const h = await shared();
  const { data: result, response } = await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'a lighthouse at dawn', size: '1024x1024', user: 'end-user-7' })
    .withResponse();
  t.equal(result.data?.length, 1);
  t.same(await decoded(result.data?.[0].b64_json), { format: 'png', width: 1024, height: 1024 });
  t.match(result, { size: '1024x1024', output_format: 'png', background: 'opaque', quality: 'auto' });
  t.equal(result.usage?.total_tokens, 25, 'usage is the tokens charged');
  const tasks = await tasksOf(h);
  t.same(response.headers.get('x-imagegen-task-ids'), tasks[0].id, 'the header names the task');
  t.match(response.headers.get('access-control-expose-headers'), /x-imagegen-task-ids/, 'a page can read it');
  t.equal(tasks[0].status, 'COMPLETED');
  t.equal(tasks[0].endUserId, 'end-user-7', '`user` is the task’s end-user id');
  const listed = await h.app.inject({ url: '/api/v1/images/generations', headers: h.auth });
  t.same(
    listed.json().data.map((task: { task_id: string }) => task.task_id),
    [tasks[0].id],
    'visible in /api/v1',
  );
  t.equal(await debitsOf(h), 25);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('openai SDK: response_format url answers a signed URL that serves the image', async (t) => {
  const h = await shared();
  const result = await h.openai.images.generate({
    model: 'beta-v5-pro',
    prompt: 'a harbour in the rain',
    size: '1536x1024',
    response_format: 'url',
  });
  const url = result.data?.[0].url ?? '';
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/media\/[0-9a-f-]+\/content\?expires=\d+&signature=/);
  t.equal(result.size, '1264x848', '1536x1024 is 3:2 at 1K');
  const download = await fetch(url);
  t.equal(download.status, 200, 'the URL works without the key');
  t.same(await pixelsOf(Buffer.from(await download.arrayBuffer())), { format: 'png', width: 1264, height: 848 });
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('AI SDK: generateImage returns the images with nothing beyond createOpenAICompatible', async (t) => {
  const h = await shared();
  const { images } = await generateImage({
    model: h.aiSdk.imageModel('alpha-pro'),
    prompt: 'a red bicycle against a wall',
    size: '1024x1536',
    n: 2,
  });
  t.equal(images.length, 2);
  for (const image of images) t.same(await pixelsOf(image.uint8Array), { format: 'png', width: 848, height: 1264 });
  t.equal((await tasksOf(h)).length, 2, 'n = 2 is two tasks');
  t.equal(await debitsOf(h), 50, 'each charged');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('openai SDK: n = 2 answers two images from two tasks, each charged', async (t) => {
  const h = await shared();
  const { data: result, response } = await h.openai.images
    .generate({ model: 'beta-v5-pro', prompt: 'two cats on a sofa', n: 2, size: '2752x1536' })
    .withResponse();
  t.equal(result.data?.length, 2);
  for (const image of result.data ?? [])
    t.same(await decoded(image.b64_json), { format: 'png', width: 2752, height: 1536 });
  t.equal(response.headers.get('x-imagegen-task-ids')?.split(',').length, 2);
  t.equal(result.usage?.total_tokens, 100, 'two tasks of 16:9 2K on beta-v5-pro');
  t.equal(await debitsOf(h), 100);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('openai SDK: images.edit with two reference images stores them as uploads and references both', async (t) => {
  const h = await shared();
  const first = await toFile(await encodedImage('png', 320, 240), 'first.png', { type: 'image/png' });
  const second = await toFile(await encodedImage('jpeg', 200, 300), 'second.jpg', { type: 'image/jpeg' });
  const result = await h.openai.images.edit({
    model: 'alpha-pro',
    prompt: 'the two of them at sea',
    image: [first, second],
  });
  t.same(await decoded(result.data?.[0].b64_json), { format: 'png', width: 1024, height: 1024 });
  const [task] = await tasksOf(h);
  t.equal(task.imageReference.length, 2, 'both images are references of the task');
  for (const mediaId of task.imageReference) {
    const media = await h.store.media.getMedia(h.accountId, mediaId, new Date());
    t.equal(media?.source, 'upload', 'each stored as an upload of the account');
  }
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('AI SDK: an edit (prompt with images) is sent to /images/edits and answered', async (t) => {
  const h = await shared();
  const { images } = await generateImage({
    model: h.aiSdk.imageModel('beta-v5-pro'),
    prompt: {
      text: 'both of them in one frame',
      images: [await encodedImage('png', 64, 64), await encodedImage('webp', 80, 60)],
    },
  });
  t.same(await pixelsOf(images[0].uint8Array), { format: 'png', width: 1024, height: 1024 });
  t.equal((await tasksOf(h))[0].imageReference.length, 2);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('every output format is answered in that format at the exact size', async (t) => {
  const h = await shared();
  for (const format of ['png', 'jpeg', 'webp'] as const) {
    const result = await h.openai.images.generate({
      model: 'alpha-pro',
      prompt: `a quiet street in ${format}`,
      size: '1200x896',
      output_format: format,
    });
    t.equal(result.output_format, format);
    t.same(await decoded(result.data?.[0].b64_json), { format, width: 1200, height: 896 });
  }
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('an invalid size is a BadRequestError naming size and the accepted values; nothing charged', async (t) => {
  const h = await shared();
  const error = await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'a lighthouse', size: '1000x1000' as never })
    .catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.BadRequestError, 'BadRequestError');
  const { param, type, message } = error as InstanceType<typeof OpenAI.BadRequestError>;
  t.same([param, type], ['size', 'invalid_request_error']);
  t.match(message, /auto, 256x256, 512x512, 1024x1024, 1536x1024, 1024x1536, 1792x1024, 1024x1792, .*1376x768/);
  t.equal((await tasksOf(h)).length, 0);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('several wrong fields are each named; unknown fields are ignored', async (t) => {
  const h = await shared();
  const response = await fetch(`${h.baseURL}/images/generations`, {
    method: 'POST',
    headers: { ...h.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'beta-v5-pro', prompt: 'x', n: 11, background: 'transparent', no_such_field: 1 }),
  });
  t.equal(response.status, 400);
  const { error } = (await response.json()) as { error: { param: string; message: string } };
  t.equal(error.param, 'prompt');
  t.match(error.message, /prompt: .*n: .*background: .*transparent/);
  t.notMatch(error.message, /no_such_field/);
});

t.test('stream: true is refused naming stream; a mask naming mask', async (t) => {
  const h = await shared();
  const streamed = await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'a lighthouse', stream: true } as never)
    .catch((e: unknown) => e);
  t.match(streamed, { status: 400, param: 'stream' });
  const masked = await h.openai.images
    .edit({
      model: 'alpha-pro',
      prompt: 'fill it in',
      image: await toFile(await encodedImage('png', 64, 64), 'a.png', { type: 'image/png' }),
      mask: await toFile(await encodedImage('png', 64, 64), 'm.png', { type: 'image/png' }),
    })
    .catch((e: unknown) => e);
  t.match(masked, { status: 400, param: 'mask' });
  t.equal((await tasksOf(h)).length, 0);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('a stream that is no boolean is a BadRequestError naming stream; nothing charged', async (t) => {
  const h = await shared();
  const refused = await h.openai.images
    .generate({ model: 'beta-v5-pro', prompt: 'two gulls over the harbour', stream: [[true]] } as never, {
      idempotencyKey: 'stream-array-1',
    })
    .catch((e: unknown) => e);
  t.ok(refused instanceof OpenAI.BadRequestError);
  t.match(refused, { status: 400, param: 'stream', message: /stream must be a boolean/ });
  t.equal((await tasksOf(h)).length, 0);
  t.equal(await debitsOf(h), 0);
});

t.test('a field nested thousands deep under an Idempotency-Key: answered and replayed, not a 500', async (t) => {
  // Found by the OpenAPI fuzz test: the key's fingerprint walked the body by recursion, and a few
  // KiB of nested arrays overflowed the stack. An unknown field is ignored, so the request is valid
  // and is fingerprinted. Sent with fetch: the openai SDK overflows its own stack on such a body.
  const h = await shared();
  const depth = 20_000;
  const send = () =>
    fetch(`${h.baseURL}/images/generations`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json', 'idempotency-key': 'deep-field-1' },
      body: `{"model":"alpha-pro","prompt":"two gulls over the harbour","extra":${'['.repeat(depth)}${']'.repeat(depth)}}`,
    });
  const first = await send();
  t.equal(first.status, 200);
  const { data } = (await first.json()) as { data: { b64_json: string }[] };
  t.equal(data.length, 1);
  const replay = await send();
  t.equal(replay.status, 200);
  t.same(((await replay.json()) as { data: unknown }).data, data, 'the same body under the same key replays');
  t.equal((await tasksOf(h)).length, 1);
  t.equal(await debitsOf(h), 25, 'one debit');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('an unknown model is a NotFoundError model_not_found naming the models there are', async (t) => {
  const h = await shared();
  const error = await h.openai.images
    .generate({ model: 'gpt-image-1', prompt: 'a lighthouse' })
    .catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.NotFoundError);
  t.match(error, { code: 'model_not_found', param: 'model', message: /alpha-pro, beta-v5-pro/ });
});

t.test('models.list and models.retrieve answer the catalog in OpenAI shape', async (t) => {
  const h = await shared();
  const ids: string[] = [];
  for await (const model of h.openai.models.list()) ids.push(model.id);
  t.same(ids, ['alpha-pro', 'beta-v5-pro']);
  t.match(await h.openai.models.retrieve('beta-v5-pro'), { id: 'beta-v5-pro', object: 'model' });
  const missing = await h.openai.models.retrieve('dall-e-3').catch((e: unknown) => e);
  t.match(missing, { status: 404, code: 'model_not_found' });
});

t.test('a wrong key is an AuthenticationError invalid_api_key, for both clients', async (t) => {
  const h = await shared();
  const wrong = new OpenAI({ baseURL: h.baseURL, apiKey: 'sk-not-a-key' });
  const error = await wrong.images.generate({ model: 'alpha-pro', prompt: 'a lighthouse' }).catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.AuthenticationError);
  t.match(error, { code: 'invalid_api_key' });
  const aiError = await generateImage({
    model: createOpenAICompatible({ name: 'imagegen', baseURL: h.baseURL, apiKey: 'sk-not-a-key' }).imageModel(
      'alpha-pro',
    ),
    prompt: 'a lighthouse',
  }).catch((e: unknown) => e);
  t.match(aiError, { statusCode: 401 });
});

t.test('too few tokens is 429 insufficient_quota, not retried, nothing debited', async (t) => {
  const h = await shared(30);
  const { response, error } = await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'two lighthouses', n: 2 })
    .then(() => ({ response: null, error: null }))
    .catch((e: InstanceType<typeof OpenAI.APIError>) => ({ response: e.headers, error: e }));
  t.ok(error instanceof OpenAI.RateLimitError, 'RateLimitError');
  t.match(error, { code: 'insufficient_quota', type: 'insufficient_quota' });
  t.equal(response?.get('x-should-retry'), 'false', 'the SDK does not retry it');
  t.equal((await tasksOf(h)).length, 0, 'neither of the two tasks was made');
  t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 30);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('a prompt the provider refuses is 400 moderation_blocked; its tokens are refunded', async (t) => {
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(geminiReply.promptBlocked('PROHIBITED_CONTENT'));
  // An app of its own: alpha-pro on a provider that refuses the prompt.
  const h = await setup(t, {
    env: { ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: 'gemini-test-key', GEMINI_BASE_URL: upstream.url },
  });
  const error = await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'something refused' })
    .catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.BadRequestError);
  t.match(error, { code: 'moderation_blocked', type: 'image_generation_user_error' });
  const [task] = await tasksOf(h);
  t.match(task, { status: 'FAILED', error: { code: 'content_policy' } });
  t.same(await h.store.accounts.ledgerTotals(h.accountId), { grant: 1000, debit: 25, refund: 25 });
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('n = 2 with one task refused: the images of the other, the refused one refunded', async (t) => {
  // An app of its own: a worker whose generator refuses the first task.
  const h = await setup(t, {
    generator: new ScriptedGenerator([new GenerationError('content_policy', 'refused by the model', false), 'render']),
  });
  const result = await h.openai.images.generate({ model: 'alpha-pro', prompt: 'one of two refused', n: 2 });
  t.equal(result.data?.length, 1, 'the completed one');
  t.equal(result.usage?.total_tokens, 25, 'usage counts only what stays charged');
  const statuses = (await tasksOf(h)).map((task) => task.status).sort();
  t.same(statuses, ['COMPLETED', 'FAILED']);
  t.same(await h.store.accounts.ledgerTotals(h.accountId), { grant: 1000, debit: 50, refund: 25 });
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('the creates rate limit is a RateLimitError rate_limit_exceeded with Retry-After', async (t) => {
  // An app of its own: a creates budget of one a minute.
  const h = await setup(t, { env: { RATE_LIMIT_CREATES_PER_MIN: '1' } });
  await h.openai.images.generate({ model: 'alpha-pro', prompt: 'the first one' });
  const error = (await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'one too many' }, { maxRetries: 0 })
    .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
  t.ok(error instanceof OpenAI.RateLimitError);
  t.match(error, { code: 'rate_limit_exceeded', type: 'requests' });
  t.ok(Number(error.headers?.get('retry-after')) > 0, 'Retry-After');
  t.equal(await debitsOf(h), 25, 'only the first charged');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('a retry after a dropped connection, with an Idempotency-Key, gets the images of one debit', async (t) => {
  // An app of its own: its worker starts once the first attempt is charged, and its store is watched.
  const h = await setup(t, { startWorker: false });
  const proxy = await startCuttingProxy(t, { host: '127.0.0.1', port: Number(new URL(h.baseURL).port) });
  const client = new OpenAI({ baseURL: `http://${proxy.address}/v1`, apiKey: h.key });
  // The first attempt's tasks are charged; then its connection drops before the answer.
  const charged = new Promise<void>((resolve) => {
    const insert = h.store.tasks.insertTaskWithDebit.bind(h.store.tasks);
    h.store.tasks.insertTaskWithDebit = async (...args) => {
      await insert(...args);
      resolve();
    };
  });
  const answered = client.images.generate(
    { model: 'alpha-pro', prompt: 'a lighthouse through a bad network' },
    { headers: { 'Idempotency-Key': 'retry-test-1' } },
  );
  await charged;
  proxy.resetAll();
  h.worker.start();
  const result = await answered;
  t.same(await decoded(result.data?.[0].b64_json), { format: 'png', width: 1024, height: 1024 });
  t.ok(proxy.connections >= 2, `the SDK retried (${proxy.connections} connections)`);
  t.equal((await tasksOf(h)).length, 1, 'one task');
  t.equal(await debitsOf(h), 25, 'one debit');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('past OPENAI_COMPAT_WAIT_SECONDS: 504 generation_timeout naming the tasks, which go on', async (t) => {
  // An app of its own: a wait of one second, and a worker started only after it.
  const h = await setup(t, { env: { OPENAI_COMPAT_WAIT_SECONDS: '1' }, startWorker: false });
  const error = (await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'a slow one' })
    .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
  t.equal(error.status, 504);
  t.equal(error.headers?.get('x-should-retry'), 'false', 'without a key a retry would pay again: not retried');
  const [task] = await tasksOf(h);
  t.match(error, { code: 'generation_timeout', message: new RegExp(task.id) });
  t.equal(error.headers?.get('x-imagegen-task-ids'), task.id);
  t.equal((await tasksOf(h)).length, 1, 'no retry made another task');
  h.worker.start();
  const finished = await h.app.inject({ url: `/api/v1/images/generations/${task.id}?wait=30`, headers: h.auth });
  t.equal(finished.json().data.status, 'COMPLETED', 'the task went on');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('the wait outlasts the HTTP request and idle timeouts: the answer comes, not a closed connection', async (t) => {
  // An app of its own: HTTP timeouts shorter than its wait, and no worker to end the wait early.
  const h = await setup(t, {
    env: {
      OPENAI_COMPAT_WAIT_SECONDS: '3',
      HTTP_REQUEST_TIMEOUT_MS: '1000',
      HTTP_HEADERS_TIMEOUT_MS: '500',
      HTTP_IDLE_TIMEOUT_MS: '1000',
    },
    startWorker: false,
  });
  const started = Date.now();
  const error = (await h.openai.images
    .generate({ model: 'alpha-pro', prompt: 'a slow one' }, { maxRetries: 0 })
    .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
  t.equal(error.status, 504, 'the wait ran its course');
  t.ok(Date.now() - started >= 2900, 'after the whole wait');
});

t.test('what the clients send on a retry: the same body, no idempotency key of their own', async (t) => {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    request.resume();
    response.writeHead(500, { 'content-type': 'application/json', 'retry-after-ms': '1' });
    response.end(JSON.stringify({ error: { message: 'boom', type: 'server_error', param: null, code: null } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

  await new OpenAI({ baseURL, apiKey: 'k' }).images.generate({ model: 'alpha-pro', prompt: 'p' }).catch(() => {});
  t.same(
    seen.map((h) => h['x-stainless-retry-count']),
    ['0', '1', '2'],
    'openai: two retries, counted in x-stainless-retry-count',
  );
  t.notOk(
    seen.some((h) => h['idempotency-key'] !== undefined),
    'openai: no Idempotency-Key unless the caller sends one',
  );
  seen.length = 0;
  await generateImage({
    model: createOpenAICompatible({ name: 'x', baseURL, apiKey: 'k' }).imageModel('alpha-pro'),
    prompt: 'p',
    maxRetries: 1,
  }).catch(() => {});
  t.equal(seen.length, 2, 'AI SDK: retried');
  t.notOk(
    seen.some((h) => h['idempotency-key'] !== undefined || h['x-stainless-retry-count'] !== undefined),
    'AI SDK: nothing tells a retry from a new request',
  );
});
