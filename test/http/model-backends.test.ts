import sharp from 'sharp';
import t, { type Test } from 'tap';
import { workerBackends } from '../../src/worker/build-worker.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp, fileTestApp, type TestApp } from '../helpers/app.js';
import { FakeUpstream, type JsonReply, pngBase64 } from '../helpers/fake-upstream.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { GEMINI_FAILURES } from '../helpers/provider-failures.js';
import { geminiReply, openAiReply } from '../helpers/provider-replies.js';
import { upstreamFromHere, type UpstreamUnderTest } from '../helpers/upstream-view.js';
import { testWorker } from '../helpers/worker.js';

const GEMINI_KEY = 'gemini-e2e-key-never-logged';

/** An in-process worker for `harness`, its generators from configuration. */
function startWorker(t: Test, harness: TestApp, events: TaskEvents, now?: () => Date): void {
  const { config } = harness;
  testWorker(t, harness, {
    ...(now ? { now } : {}),
    events,
    backends: workerBackends(config, 1),
    generationTimeoutMs: config.GENERATION_TIMEOUT_MS,
    maxAttempts: config.TASK_MAX_ATTEMPTS,
  }).start();
}

type Harness = TestApp & { accountId: string; key: string; auth: { authorization: string } } & {
  upstream: UpstreamUnderTest;
};

// One app for the file, alpha-pro on a loopback Gemini, with its worker; each test has its own
// account and sees the upstream's requests from its start (upstreamFromHere). A test that needs
// other configuration, or whose backend's circuit opens (that state is the store's, for every
// account), has its own app and upstream (setup).
const fileUpstream = await FakeUpstream.start(t);
const fileEvents = new TaskEvents();
const fileApp = fileTestApp(
  { ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: GEMINI_KEY, GEMINI_BASE_URL: fileUpstream.url },
  { events: fileEvents },
);
t.before(() => startWorker(t, fileApp(), fileEvents));

/** A new account of 1000 tokens on the file's app. */
async function shared(): Promise<Harness> {
  const harness = fileApp();
  return { ...harness, ...(await harness.newAccount(1000)), upstream: upstreamFromHere(fileUpstream) };
}

/** An app of the test's own and its worker (on the clock `now`, if given), alpha-pro on a loopback Gemini of its own. */
async function setup(t: Test, moreEnv: (upstreamUrl: string) => Record<string, string> = () => ({}), now?: () => Date) {
  const upstream = await FakeUpstream.start(t);
  const events = new TaskEvents();
  const env = {
    ALPHA_PRO_BACKEND: 'gemini',
    GEMINI_API_KEY: GEMINI_KEY,
    GEMINI_BASE_URL: upstream.url,
    ...moreEnv(upstream.url),
  };
  const harness = await buildTestApp(t, env, now ? { events, now } : { events });
  startWorker(t, harness, events, now);
  const account = await harness.newAccount(1000);
  return { ...harness, ...account, upstream };
}

async function upload(h: Harness, width: number, height: number): Promise<string> {
  return uploadBytes(h, await encodedImage('png', width, height));
}

async function uploadBytes(h: Harness, png: Buffer): Promise<string> {
  const request = multipartRequest([filePart(png, { filename: 'ref.png' })]);
  const response = await h.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    payload: request.payload,
    headers: { ...h.auth, ...request.headers },
  });
  if (response.statusCode !== 201) throw new Error(`upload failed: ${response.body}`);
  return response.json().data.media_id;
}

async function create(h: Harness, body: object): Promise<string> {
  const created = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: h.auth,
    payload: body,
  });
  if (created.statusCode !== 202) throw new Error(`create failed: ${created.body}`);
  return created.json().data.task_id;
}

async function awaitTerminal(h: Harness, taskId: string) {
  let task = { status: 'CREATED' } as { status: string; [key: string]: unknown };
  for (let polls = 0; polls < 10 && !['COMPLETED', 'FAILED', 'CANCELED'].includes(task.status); polls++) {
    task = (await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=30`, headers: h.auth })).json().data;
  }
  return task;
}

async function refundsOf(h: Harness, taskId: string): Promise<number> {
  const page = await h.store.accounts.listLedger(h.accountId, { limit: 100 });
  return page.items.filter((entry) => entry.kind === 'refund' && entry.taskId === taskId).length;
}

t.test('alpha-pro image-to-image on Gemini completes; the result has the exact catalog size', async (t) => {
  const h = await shared();
  // The model answers 1024×1024 to a 16:9 request: the service resizes and crops to 1376×768.
  h.upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
  const references = [await upload(h, 320, 240), await upload(h, 200, 300)];

  const taskId = await create(h, {
    model: 'alpha-pro',
    prompt: 'the two of them at sea',
    image_reference: references,
    parameters: { aspect_ratio: '16:9' },
  });
  const task = (await awaitTerminal(h, taskId)) as {
    status: string;
    generated: { url: string; width: number; height: number; resized_from: unknown }[];
  };

  t.equal(task.status, 'COMPLETED');
  t.match(task.generated[0], {
    width: 1376,
    height: 768,
    content_type: 'image/png',
    resized_from: { width: 1024, height: 1024 },
  });
  const { pathname, search } = new URL(task.generated[0].url);
  const file = await h.app.inject({ url: pathname + search });
  t.equal(file.statusCode, 200);
  const metadata = await sharp(file.rawPayload).metadata();
  t.same([metadata.format, metadata.width, metadata.height], ['png', 1376, 768]);

  t.equal(h.upstream.requests.length, 1);
  const body = JSON.parse(h.upstream.requests[0].body.toString());
  t.same(body.generationConfig.imageConfig, { aspectRatio: '16:9', imageSize: '1K' });
  const sent = body.contents[0].parts.slice(1) as { inlineData: { mimeType: string; data: string } }[];
  t.equal(sent.length, 2, 'both references sent inline');
  for (const [i, mediaId] of references.entries()) {
    const stored = await h.app.inject({ url: `/api/v1/media/${mediaId}/content`, headers: h.auth });
    t.equal(sent[i].inlineData.mimeType, 'image/png');
    t.ok(
      Buffer.from(sent[i].inlineData.data, 'base64').equals(stored.rawPayload),
      `reference ${i + 1} is the stored upload, in order`,
    );
  }
  t.equal(h.upstream.requests[0].headers['x-goog-api-key'], GEMINI_KEY);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test(
  "8 references (alpha-pro's most) over the per-image limit: each reaches Gemini within it, in order, and the task completes",
  async (t) => {
    const h = await shared();
    h.upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
    // Noise does not compress: ~7.9 MB each, over the 7 MB per inline image and over each one's
    // share (1.75 MB) of the 20 MB request: sent as stored, Gemini would refuse the call.
    const big = await encodedImage('png', 2000, 1500);
    t.ok(big.length > 7_000_000, `each reference is ${big.length} bytes`);
    const references: string[] = [];
    for (let i = 0; i < 8; i++) references.push(await uploadBytes(h, big));

    const taskId = await create(h, { model: 'alpha-pro', prompt: 'all of them at once', image_reference: references });
    const task = await awaitTerminal(h, taskId);

    t.equal(task.status, 'COMPLETED');
    t.equal(h.upstream.refused.length, 0, 'nothing the provider would refuse');
    const body = JSON.parse(h.upstream.requests[0].body.toString());
    const sent = body.contents[0].parts.slice(1) as { inlineData: { mimeType: string; data: string } }[];
    t.equal(sent.length, 8, 'every reference sent');
    for (const [i, part] of sent.entries()) {
      const bytes = Buffer.from(part.inlineData.data, 'base64');
      t.ok(bytes.length <= 1_750_000, `reference ${i + 1} within its share of the request (${bytes.length} bytes)`);
      const metadata = await sharp(bytes).metadata();
      t.same([part.inlineData.mimeType, metadata.format], ['image/jpeg', 'jpeg']);
      t.ok(Math.abs((metadata.width ?? 0) / (metadata.height ?? 1) - 4 / 3) < 0.01, 'its shape kept');
    }
    await assertLedgerInvariant(t, h.store, h.accountId);
  },
);

t.test('a prompt Gemini blocks fails with content_policy and exactly one refund', async (t) => {
  const h = await shared();
  h.upstream.replyWith(geminiReply.promptBlocked('PROHIBITED_CONTENT'));
  const taskId = await create(h, { model: 'alpha-pro', prompt: 'something the provider refuses' });
  const task = await awaitTerminal(h, taskId);
  t.equal(task.status, 'FAILED');
  t.match(task.error, { code: 'content_policy' });
  t.notMatch(JSON.stringify(task.error), /PROHIBITED/, 'the upstream reason is not shown');
  t.equal(h.upstream.requests.length, 1, 'a policy block is not retried');
  t.equal(await refundsOf(h, taskId), 1);
  t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 1000);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('cancel during a slow Gemini call aborts the call and refunds once', async (t) => {
  const h = await shared();
  h.upstream.replyWith({ hang: true });
  const taskId = await create(h, { model: 'alpha-pro', prompt: 'a slow one' });
  await h.upstream.received(1);

  const canceled = await h.app.inject({
    method: 'POST',
    url: `/api/v1/images/generations/${taskId}/cancel`,
    headers: h.auth,
  });
  t.equal(canceled.statusCode, 200);
  t.equal(canceled.json().data.status, 'CANCELED');
  await h.upstream.abandonedCount(1);
  t.equal(h.upstream.abandoned, 1, 'the provider saw the call abandoned');
  t.equal(await refundsOf(h, taskId), 1);
  t.equal((await awaitTerminal(h, taskId)).status, 'CANCELED');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test(
  'a Gemini call past GENERATION_TIMEOUT_MS is aborted; out of attempts, the task fails with one refund',
  async (t) => {
    // An app of its own: a generation timeout of 300 ms and one attempt.
    const h = await setup(t, () => ({ GENERATION_TIMEOUT_MS: '300', TASK_MAX_ATTEMPTS: '1' }));
    h.upstream.replyWith({ hang: true });
    const taskId = await create(h, { model: 'alpha-pro', prompt: 'a hanging one' });
    const task = await awaitTerminal(h, taskId);
    t.equal(task.status, 'FAILED');
    t.match(task.error, { code: 'generation_timeout' });
    await h.upstream.abandonedCount(1);
    t.equal(h.upstream.abandoned, 1, 'the provider saw the call abandoned');
    t.equal(await refundsOf(h, taskId), 1);
    await assertLedgerInvariant(t, h.store, h.accountId);
  },
);

t.test('beta-v5-pro stays on the local renderer when only alpha-pro is on Gemini', async (t) => {
  const h = await shared();
  const taskId = await create(h, { model: 'beta-v5-pro', prompt: 'a local one' });
  const task = (await awaitTerminal(h, taskId)) as { status: string; generated: { resized_from: unknown }[] };
  t.equal(task.status, 'COMPLETED');
  t.equal(task.generated[0].resized_from, null, 'rendered at the exact size: nothing resized');
  t.equal(h.upstream.requests.length, 0);
});

t.test('beta-v5-pro on an OpenAI-compatible backend: image-to-image through images.edit, exact size', async (t) => {
  // An app of its own: beta-v5-pro on an OpenAI-compatible backend.
  const h = await setup(t, (url) => ({
    ALPHA_PRO_BACKEND: 'local',
    BETA_V5_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'sk-e2e',
    OPENAI_BASE_URL: `${url}/v1`,
    OPENAI_IMAGE_MODEL: 'gpt-image-2',
  }));
  h.upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  const reference = await upload(h, 64, 64);
  const taskId = await create(h, {
    model: 'beta-v5-pro',
    prompt: 'the same at night',
    image_reference: [reference],
    parameters: { aspect_ratio: '3:2' },
  });
  const task = (await awaitTerminal(h, taskId)) as {
    status: string;
    generated: { width: number; height: number; resized_from: unknown }[];
  };
  t.equal(task.status, 'COMPLETED');
  t.match(task.generated[0], { width: 1264, height: 848, resized_from: { width: 1536, height: 1024 } });
  t.equal(h.upstream.requests[0].url, '/v1/images/edits');
  t.equal(h.upstream.requests[0].headers.authorization, 'Bearer sk-e2e');
});

t.test('beta-v5-pro on Azure OpenAI v1 by configuration: the deployment as model, the key as api-key', async (t) => {
  // An app of its own: beta-v5-pro on Azure OpenAI.
  const h = await setup(t, (url) => ({
    ALPHA_PRO_BACKEND: 'local',
    BETA_V5_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'azure-key',
    OPENAI_BASE_URL: `${url}/openai/v1/`,
    OPENAI_API_KEY_HEADER: 'api-key',
    OPENAI_IMAGE_MODEL: 'prod-images',
    OPENAI_MODEL_FAMILY: 'gpt-image',
    OPENAI_IMAGE_QUALITY: 'medium',
  }));
  h.upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  const taskId = await create(h, { model: 'beta-v5-pro', prompt: 'on Azure', parameters: { aspect_ratio: '3:2' } });
  t.equal((await awaitTerminal(h, taskId)).status, 'COMPLETED');
  const [request] = h.upstream.requests;
  t.equal(request.url, '/openai/v1/images/generations');
  t.equal(request.headers['api-key'], 'azure-key');
  t.equal(request.headers.authorization, undefined);
  t.match(JSON.parse(request.body.toString()), { model: 'prod-images', quality: 'medium', size: '1536x1024' });
  t.equal(h.upstream.refused.length, 0);
});

/** The pixel size of the task's result as downloaded through its signed URL. */
async function downloadedSize(h: Harness, task: { generated: { url: string }[] }): Promise<[number, number]> {
  const { pathname, search } = new URL(task.generated[0].url);
  const file = await h.app.inject({ url: pathname + search });
  const metadata = await sharp(file.rawPayload).metadata();
  return [metadata.width ?? 0, metadata.height ?? 0];
}

type Completed = { status: string; generated: { url: string; width: number; height: number; resized_from: unknown }[] };

interface SizeCase {
  name: string;
  env: Record<string, string>;
  body: object;
  /** Whether the request body asks for what the model makes. */
  asked: (request: { size?: unknown; generationConfig?: { imageConfig?: unknown } }) => boolean;
  reply: () => Promise<JsonReply>;
  catalog: [number, number];
  resizedFrom: { width: number; height: number };
}

t.test(
  'cells the provider does not make natively: asked in a size it takes, delivered at the catalog size',
  async (t) => {
    const cases: SizeCase[] = [
      {
        name: 'beta-v5-pro 2K 21:9 on gpt-image-1',
        env: { BETA_V5_PRO_BACKEND: 'openai', OPENAI_IMAGE_MODEL: 'gpt-image-1' },
        body: { model: 'beta-v5-pro', parameters: { aspect_ratio: '21:9', resolution: '2K' } },
        asked: (request) => request.size === '1536x1024',
        reply: () => pngBase64(1536, 1024).then(openAiReply.image),
        catalog: [3168, 1344],
        resizedFrom: { width: 1536, height: 1024 },
      },
      {
        name: 'alpha-pro 4K 16:9 on gpt-image-2',
        env: { ALPHA_PRO_BACKEND: 'openai', OPENAI_IMAGE_MODEL: 'gpt-image-2' },
        body: { model: 'alpha-pro', parameters: { aspect_ratio: '16:9', resolution: '4K' } },
        asked: (request) => request.size === '3840x2128',
        reply: () => pngBase64(3840, 2128).then(openAiReply.image),
        catalog: [5504, 3072],
        resizedFrom: { width: 3840, height: 2128 },
      },
      {
        name: 'alpha-pro 2K 4:5 on gemini-2.5-flash-image',
        env: { GEMINI_MODEL: 'gemini-2.5-flash-image' },
        body: { model: 'alpha-pro', parameters: { aspect_ratio: '4:5', resolution: '2K' } },
        asked: (request) =>
          JSON.stringify(request.generationConfig?.imageConfig) === JSON.stringify({ aspectRatio: '4:5' }),
        reply: () => pngBase64(896, 1152).then((data) => geminiReply.image(data)),
        catalog: [1856, 2304],
        resizedFrom: { width: 896, height: 1152 },
      },
    ];
    for (const c of cases) {
      t.test(c.name, async (t) => {
        // An app of its own per case: its backend and model.
        const h = await setup(t, (url) => ({
          OPENAI_API_KEY: 'sk-e2e',
          OPENAI_BASE_URL: `${url}/v1`,
          // An operator who accepts enlargements up to 4× (the default, 2, refuses two of these: below).
          MAX_UPSCALE: '4',
          ...c.env,
        }));
        h.upstream.replyWith(await c.reply());
        const taskId = await create(h, { prompt: 'a wide harbour at noon', ...c.body });
        const task = (await awaitTerminal(h, taskId)) as Completed;
        t.equal(task.status, 'COMPLETED');
        t.equal(h.upstream.refused.length, 0, 'the provider took the request');
        t.ok(c.asked(JSON.parse(h.upstream.requests[0].body.toString())), 'asked for what the model makes');
        t.match(task.generated[0], { width: c.catalog[0], height: c.catalog[1], resized_from: c.resizedFrom });
        t.same(await downloadedSize(h, task), c.catalog, 'the download has the exact catalog size');
      });
    }
  },
);

const documented = (name: string) => GEMINI_FAILURES.find((row) => row.name === name)!;

t.test('a bad Gemini key fails the task at once with generator_unavailable, refunded, one call', async (t) => {
  // An app of its own: a bad key opens its backend's circuit.
  const h = await setup(t);
  h.upstream.replyWith(documented('an invalid or expired key: 400 INVALID_ARGUMENT, ErrorInfo API_KEY_INVALID').reply);
  const taskId = await create(h, { model: 'alpha-pro', prompt: 'with a revoked key' });
  const task = await awaitTerminal(h, taskId);
  t.equal(task.status, 'FAILED');
  t.match(task.error, { code: 'generator_unavailable' });
  t.notMatch(JSON.stringify(task.error), /API key/, 'the provider text is not shown');
  t.equal(h.upstream.requests.length, 1);
  t.equal(await refundsOf(h, taskId), 1);
  t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 1000);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('a per-day Gemini quota fails the task within seconds, one call, refunded', async (t) => {
  // An app of its own: an exhausted quota opens its backend's circuit.
  const h = await setup(t);
  h.upstream.replyWith(documented('a per-day quota: 429 with a QuotaFailure naming a PerDay quota').reply);
  const started = Date.now();
  const taskId = await create(h, { model: 'alpha-pro', prompt: 'one too many today' });
  const task = await awaitTerminal(h, taskId);
  t.equal(task.status, 'FAILED');
  t.match(task.error, { code: 'upstream_quota_exhausted' });
  t.ok(Date.now() - started < 5_000, 'within seconds');
  t.equal(h.upstream.requests.length, 1);
  t.equal(await refundsOf(h, taskId), 1);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('Gemini NO_IMAGE then an image: the task completes, not refunded', async (t) => {
  const h = await shared();
  h.upstream.replyWith(documented('finishReason NO_IMAGE').reply, geminiReply.image(await pngBase64(1024, 1024)));
  const taskId = await create(h, { model: 'alpha-pro', prompt: 'second time lucky' });
  const task = await awaitTerminal(h, taskId);
  t.equal(task.status, 'COMPLETED');
  t.equal(h.upstream.requests.length, 2);
  t.equal(await refundsOf(h, taskId), 0);
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('a cell the backend would enlarge past MAX_UPSCALE is refused before any charge', async (t) => {
  // An app of its own: beta-v5-pro on gpt-image-1.
  const h = await setup(t, (url) => ({
    BETA_V5_PRO_BACKEND: 'openai',
    OPENAI_API_KEY: 'sk-e2e',
    OPENAI_BASE_URL: `${url}/v1`,
    OPENAI_IMAGE_MODEL: 'gpt-image-1',
  }));
  const refused = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: h.auth,
    payload: { model: 'beta-v5-pro', prompt: 'a wide harbour', parameters: { aspect_ratio: '21:9', resolution: '2K' } },
  });
  t.equal(refused.statusCode, 422);
  t.match(refused.json(), {
    code: 'resolution_unavailable',
    errors: [{ pointer: '/parameters/resolution', code: 'resolution_unavailable' }],
  });
  t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 1000, 'nothing charged');
  t.equal(h.upstream.requests.length, 0);
  const estimate = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/estimates',
    headers: h.auth,
    payload: { model: 'beta-v5-pro', prompt: 'a wide harbour', parameters: { aspect_ratio: '21:9', resolution: '2K' } },
  });
  t.equal(estimate.statusCode, 422, 'an estimate promises nothing a create refuses');
  const oneK = await create(h, {
    model: 'beta-v5-pro',
    prompt: 'a wide harbour',
    parameters: { aspect_ratio: '21:9' },
  });
  t.ok(oneK, '1K of the same ratio is taken');
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test(
  'a backend that answers 1024² to a 2K 21:9 task: FAILED upscale_exceeded, refunded, not completed',
  async (t) => {
    // A compatible model said to take any size: the plan cannot know it, the reply tells.
    // An app of its own: beta-v5-pro on a model said to take any size.
    const h = await setup(t, (url) => ({
      BETA_V5_PRO_BACKEND: 'openai',
      OPENAI_API_KEY: 'sk-e2e',
      OPENAI_BASE_URL: `${url}/v1`,
      OPENAI_IMAGE_MODEL: 'flux-pro',
    }));
    h.upstream.replyWith(openAiReply.image(await pngBase64(1024, 1024)));
    const taskId = await create(h, {
      model: 'beta-v5-pro',
      prompt: 'a wide harbour',
      parameters: { aspect_ratio: '21:9', resolution: '2K' },
    });
    const task = await awaitTerminal(h, taskId);
    t.equal(task.status, 'FAILED');
    t.match(task.error, { code: 'upscale_exceeded' });
    t.equal(h.upstream.requests.length, 1, 'not retried');
    t.equal(await refundsOf(h, taskId), 1);
    t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 1000);
    await assertLedgerInvariant(t, h.store, h.accountId);
  },
);

t.test(
  'a bad key opens the backend circuit: creates 503 with Retry-After, nothing charged; after the cool-down one probe closes it',
  async (t) => {
    // An app of its own: its circuit opens, with a cool-down of 1.5 s. Its clock runs with real
    // time, ahead by what the test skips: the cool-down is skipped, not waited out.
    let skippedMs = 0;
    const now = () => new Date(Date.now() + skippedMs);
    const h = await setup(t, () => ({ BACKEND_UNAVAILABLE_COOLDOWN_MS: '1500' }), now);
    h.upstream.replyWith(
      documented('an invalid or expired key: 400 INVALID_ARGUMENT, ErrorInfo API_KEY_INVALID').reply,
      geminiReply.image(await pngBase64(1024, 1024)),
    );
    const readyz = async () => {
      const response = await h.app.inject({ url: '/readyz' });
      t.equal(response.statusCode, 200, 'an open circuit does not make the node unready');
      return response.json().backends;
    };
    t.same(await readyz(), { gemini: { circuit: 'closed' } }, 'never called: closed');
    const first = await create(h, { model: 'alpha-pro', prompt: 'with a revoked key' });
    t.match(await awaitTerminal(h, first), { status: 'FAILED', error: { code: 'generator_unavailable' } });
    const balance = (await h.store.accounts.getAccount(h.accountId))?.balance;
    t.equal(balance, 1000, 'refunded');

    const refused = await h.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: h.auth,
      payload: { model: 'alpha-pro', prompt: 'while the key is bad' },
    });
    t.equal(refused.statusCode, 503);
    t.match(refused.headers['content-type'], /^application\/problem\+json/);
    t.equal(refused.json().code, 'unavailable');
    t.ok(
      Number(refused.headers['retry-after']) >= 1 && Number(refused.headers['retry-after']) <= 2,
      'Retry-After: the cool-down',
    );
    t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, balance, 'nothing charged');
    t.equal(h.upstream.requests.length, 1, 'no call while the circuit is open');
    const local = await create(h, { model: 'beta-v5-pro', prompt: 'another backend' });
    t.ok(local, 'a model on another backend is still accepted');
    let metrics = (await h.app.inject({ url: '/metrics' })).body;
    t.match(metrics, /imagegen_backend_circuit\{backend="gemini",state="unavailable"\} 1/);
    const open = await readyz();
    t.same(Object.keys(open), ['gemini'], 'the remote backends only');
    t.equal(open.gemini.circuit, 'open');
    const untilMs = Date.parse(open.gemini.until) - now().getTime();
    t.ok(untilMs > 0 && untilMs <= 1500, `open until the end of the cool-down (${untilMs} ms from now)`);

    skippedMs += 1600;
    t.same(await readyz(), { gemini: { circuit: 'half_open' } }, 'cool-down over: the next call probes');
    // Probing: a create is accepted, and its task is the one probe call; the key works again.
    const probe = await create(h, { model: 'alpha-pro', prompt: 'the key was fixed' });
    t.equal((await awaitTerminal(h, probe)).status, 'COMPLETED');
    t.equal(h.upstream.requests.length, 2);
    metrics = (await h.app.inject({ url: '/metrics' })).body;
    t.match(metrics, /imagegen_backend_circuit\{backend="gemini",state="available"\} 1/);
    t.same(await readyz(), { gemini: { circuit: 'closed' } }, 'the probe succeeded: closed');
    await assertLedgerInvariant(t, h.store, h.accountId);
  },
);

t.test('each catalog model may name its own upstream model on one backend', async (t) => {
  // An app of its own: beta-v5-pro on Gemini too, under another upstream model.
  const h = await setup(t, () => ({
    BETA_V5_PRO_BACKEND: 'gemini',
    BETA_V5_PRO_UPSTREAM_MODEL: 'gemini-2.5-flash-image',
  }));
  h.upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
  const alpha = await create(h, { model: 'alpha-pro', prompt: 'on the default model' });
  t.equal((await awaitTerminal(h, alpha)).status, 'COMPLETED');
  const beta = await create(h, { model: 'beta-v5-pro', prompt: 'on its own model' });
  t.equal((await awaitTerminal(h, beta)).status, 'COMPLETED');
  t.same(
    h.upstream.requests.map((r) => r.url),
    [
      '/v1beta/models/gemini-3-pro-image-preview:generateContent',
      '/v1beta/models/gemini-2.5-flash-image:generateContent',
    ],
  );
  const betaBody = JSON.parse(h.upstream.requests[1].body.toString());
  t.same(betaBody.generationConfig.imageConfig, { aspectRatio: '1:1' }, 'its own model’s parameters: no imageSize');
  t.equal(h.upstream.refused.length, 0);
});
