import sharp from 'sharp';
import t, { type Test } from 'tap';
import { OpenAiImagesGenerator } from '../../src/generators/openai-generator.js';
import { GenerationError, type GenerationInput } from '../../src/generators/port.js';
import { FakeUpstream, pngBase64, type ReceivedRequest } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/processes.js';
import { openAiReply } from '../helpers/provider-replies.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { imageGeneratorContract } from './generator-contract.js';

const API_KEY = 'sk-openai-test-key-do-not-log';
// A fresh signal per call: the SDK may leave a listener on the signal it was given.
const live = () => new AbortController().signal;

const input = (overrides: Partial<GenerationInput> = {}): GenerationInput => ({
  model: 'beta-v5-pro',
  prompt: 'a tin robot reading a newspaper',
  aspectRatio: '3:2',
  resolution: '1K',
  width: 1264,
  height: 848,
  references: [],
  ...overrides,
});

async function setup(
  t: Test,
  options: {
    model?: string;
    maxConcurrency?: number;
    imageSizes?: string;
    family?: 'gpt-image' | 'dall-e' | 'other';
    quality?: string;
    resultUrlsAllowPrivate?: boolean;
    resultUrlLookup?: LookupAll;
  } = {},
) {
  const upstream = await FakeUpstream.start(t);
  const generator = new OpenAiImagesGenerator({
    apiKey: API_KEY,
    baseUrl: `${upstream.url}/v1`,
    model: options.model ?? 'gpt-image-2',
    maxConcurrency: options.maxConcurrency ?? 4,
    imageSizes: options.imageSizes,
    family: options.family,
    quality: options.quality,
    resultUrlsAllowPrivate: options.resultUrlsAllowPrivate,
    resultUrlLookup: options.resultUrlLookup,
  });
  return { upstream, generator };
}

function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

/** The multipart body of an images.edit request, parsed the way a server would. */
async function formOf(request: ReceivedRequest): Promise<FormData> {
  const headers = { 'content-type': String(request.headers['content-type']) };
  return new Response(new Uint8Array(request.body), { headers }).formData();
}

t.test('contract', async (t) => {
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(openAiReply.image(await pngBase64(1024, 1024)));
  imageGeneratorContract(
    t,
    () =>
      new OpenAiImagesGenerator({
        apiKey: API_KEY,
        baseUrl: `${upstream.url}/v1`,
        model: 'gpt-image-2',
        maxConcurrency: 4,
      }),
  );
});

t.test('text-to-image is one images.generate; gpt-image-2 is asked for the catalog size itself', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  await generator.generate(input(), live());
  const [request] = upstream.requests;
  t.equal(request.method, 'POST');
  t.equal(request.url, '/v1/images/generations');
  t.equal(request.headers.authorization, `Bearer ${API_KEY}`);
  t.match(request.headers['content-type'], /^application\/json/);
  t.same(JSON.parse(request.body.toString()), {
    model: 'gpt-image-2',
    prompt: 'a tin robot reading a newspaper',
    n: 1,
    size: '1264x848',
  });
});

t.test('a seed is not sent: the images API takes none (the fake refuses it, as OpenAI does)', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  await generator.generate(input({ seed: 42 }), live());
  await generator.generate(
    input({
      seed: 42,
      references: [
        await sharp({ create: { width: 32, height: 32, channels: 3, background: '#336699' } })
          .png()
          .toBuffer(),
      ],
    }),
    live(),
  );
  t.equal(upstream.refused.length, 0);
  t.notOk('seed' in JSON.parse(upstream.requests[0].body.toString()), 'generate: no seed');
  t.equal((await formOf(upstream.requests[1])).get('seed'), null, 'edit: no seed');
});

t.test('GPT image models are not sent response_format, which they refuse, whatever their name', async (t) => {
  for (const model of ['gpt-image-1', 'chatgpt-image-latest', 'openai/gpt-image-1']) {
    const { upstream, generator } = await setup(t, { model });
    upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
    await generator.generate(input(), live());
    t.equal(JSON.parse(upstream.requests[0].body.toString()).response_format, undefined, model);
    t.equal(upstream.refused.length, 0);
  }
});

t.test('a deployment whose name says nothing is a GPT image model by OPENAI_MODEL_FAMILY', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'prod-images', family: 'gpt-image' });
  upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  await generator.generate(input(), live());
  t.same(JSON.parse(upstream.requests[0].body.toString()), {
    model: 'prod-images',
    prompt: 'a tin robot reading a newspaper',
    n: 1,
    size: '1536x1024',
  });
});

t.test('DALL·E is asked for b64_json and never sent stream, which it refuses', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'dall-e-3' });
  upstream.replyWith(openAiReply.image(await pngBase64(1792, 1024)));
  await generator.generate(input(), live());
  const body = JSON.parse(upstream.requests[0].body.toString());
  t.match(body, { model: 'dall-e-3', response_format: 'b64_json', size: '1792x1024' });
  t.notOk('stream' in body);
  t.equal(upstream.refused.length, 0);
});

t.test('OPENAI_IMAGE_QUALITY goes to the models that take it, on generate and edit', async (t) => {
  const png = Buffer.from(await pngBase64(64, 64), 'base64');
  for (const [model, quality] of [
    ['gpt-image-1', 'high'],
    ['dall-e-3', 'hd'],
  ]) {
    const { upstream, generator } = await setup(t, { model, quality });
    upstream.replyWith(openAiReply.image(await pngBase64(1024, 1024)));
    await generator.generate(input({ aspectRatio: '1:1', width: 1024, height: 1024 }), live());
    t.equal(JSON.parse(upstream.requests[0].body.toString()).quality, quality, `${model}: generate`);
    t.equal(upstream.refused.length, 0);
  }
  const { upstream, generator } = await setup(t, { model: 'gpt-image-1', quality: 'low' });
  upstream.replyWith(openAiReply.image(await pngBase64(1024, 1024)));
  await generator.generate(input({ aspectRatio: '1:1', width: 1024, height: 1024, references: [png] }), live());
  t.equal((await formOf(upstream.requests[0])).get('quality'), 'low', 'edit');
  t.equal(upstream.refused.length, 0);
});

t.test("a compatible provider's model is sent no quality", async (t) => {
  const { upstream, generator } = await setup(t, { model: 'flux-pro', quality: 'high' });
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  await generator.generate(input(), live());
  t.notOk('quality' in JSON.parse(upstream.requests[0].body.toString()));
});

t.test('the fake refuses a quality the model does not take, as OpenAI does', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'gpt-image-1', quality: 'hd' });
  const error = await rejection(generator.generate(input({ aspectRatio: '1:1', width: 1024, height: 1024 }), live()));
  t.match(error, { code: 'upstream_rejected', transient: false });
  t.equal(upstream.refused.length, 1);
  const { upstream: dalle, generator: dalleGenerator } = await setup(t, { model: 'dall-e-3', quality: 'medium' });
  t.match(await rejection(dalleGenerator.generate(input(), live())), { code: 'upstream_rejected' });
  const reply = await fetch(`${dalle.url}/v1/images/generations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dall-e-3', prompt: 'p', quality: 'medium', size: '1024x1024' }),
  });
  t.equal(reply.status, 400);
  t.match(await reply.json(), {
    error: {
      param: 'quality',
      code: 'invalid_value',
      message: "Invalid value: 'medium'. Supported values are: 'standard', 'hd'.",
    },
  });
});

t.test("Azure OpenAI's v1 endpoint: the key as api-key only, the deployment as model, generate and edit", async (t) => {
  const upstream = await FakeUpstream.start(t);
  const azure = (apiKeyHeader?: 'api-key') =>
    new OpenAiImagesGenerator({
      apiKey: API_KEY,
      baseUrl: `${upstream.url}/openai/v1/`,
      apiKeyHeader,
      model: 'prod-images',
      family: 'gpt-image',
      maxConcurrency: 1,
    });
  upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  await azure('api-key').generate(input(), live());
  const png = Buffer.from(await pngBase64(64, 64), 'base64');
  await azure('api-key').generate(input({ references: [png] }), live());
  t.same(
    upstream.requests.map((r) => r.url),
    ['/openai/v1/images/generations', '/openai/v1/images/edits'],
  );
  for (const request of upstream.requests) {
    t.equal(request.headers['api-key'], API_KEY);
    t.equal(request.headers.authorization, undefined, 'no Bearer header beside it');
  }
  t.match(JSON.parse(upstream.requests[0].body.toString()), { model: 'prod-images', size: '1536x1024' });
  t.equal(upstream.refused.length, 0);

  // The key as Bearer is what Azure refuses: 401, the operator's problem.
  t.match(await rejection(azure().generate(input(), live())), { code: 'generator_unavailable', transient: false });
  t.equal(upstream.refused.length, 1);
});

t.test('a url reply is downloaded from the provider and resized like base64', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'flux-pro' });
  const url = upstream.serveFile('/files/result-1.png', Buffer.from(await pngBase64(1264, 848), 'base64'));
  upstream.replyWith(openAiReply.url(url));
  const [image] = await generator.generate(input(), live());
  t.same([image.width, image.height, image.resizedFrom], [1264, 848, undefined]);
  t.equal(upstream.downloads, 1);
});

t.test('a url to another http origin is not fetched: upstream_no_image', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'flux-pro' });
  const elsewhere = await FakeUpstream.start(t);
  const url = elsewhere.serveFile('/x.png', Buffer.from(await pngBase64(64, 64), 'base64'));
  upstream.replyWith(openAiReply.url(url.replace('127.0.0.1', 'localhost')), openAiReply.url('file:///etc/passwd'));
  t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_no_image' });
  t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_no_image' });
  t.equal(elsewhere.downloads, 0);
});

/** A stub resolver: the test host is loopback, as a provider's URL to an internal address would be. */
const TEST_HOST = 'images.provider.test';
const resolvingToLoopback: LookupAll = async (hostname) =>
  hostname === TEST_HOST ? [{ address: '127.0.0.1', family: 4 }] : [];

t.test('a url whose host resolves to a private address is not fetched, by default', async (t) => {
  const elsewhere = await FakeUpstream.start(t);
  const port = new URL(elsewhere.url).port;
  elsewhere.serveFile('/x.png', Buffer.from(await pngBase64(1264, 848), 'base64'));
  const { upstream, generator } = await setup(t, { model: 'flux-pro', resultUrlLookup: resolvingToLoopback });
  upstream.replyWith(
    openAiReply.url(`https://${TEST_HOST}:${port}/x.png`),
    openAiReply.url(`http://${TEST_HOST}:${port}/x.png`),
    openAiReply.url(`https://127.0.0.1:${port}/x.png`),
  );
  for (const what of ['https, resolving to loopback', 'http', 'a loopback address'])
    t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_no_image', transient: true }, what);
  t.equal(elsewhere.downloads, 0, 'nothing fetched');
});

t.test('OPENAI_RESULT_URL_ALLOW_PRIVATE: the same url is fetched, through the resolver', async (t) => {
  const elsewhere = await FakeUpstream.start(t);
  const port = new URL(elsewhere.url).port;
  elsewhere.serveFile('/x.png', Buffer.from(await pngBase64(1264, 848), 'base64'));
  const { upstream, generator } = await setup(t, {
    model: 'flux-pro',
    resultUrlsAllowPrivate: true,
    resultUrlLookup: resolvingToLoopback,
  });
  upstream.replyWith(openAiReply.url(`http://${TEST_HOST}:${port}/x.png`));
  const [image] = await generator.generate(input(), live());
  t.same([image.width, image.height], [1264, 848]);
  t.equal(elsewhere.downloads, 1);
});

t.test('a url download is bounded in size', async (t) => {
  const { downloadResult } = await import('../../src/generators/image-download.js');
  const upstream = await FakeUpstream.start(t);
  const url = upstream.serveFile('/big.png', Buffer.alloc(2048));
  const policy = { apiBaseUrl: upstream.url, allowPrivate: false };
  const error = await rejection(downloadResult(url, policy, live(), { maxBytes: 1024, timeoutMs: 5000 }));
  t.match(error, { code: 'upstream_invalid_image', transient: true });
  const missing = await rejection(downloadResult(`${upstream.url}/none.png`, policy, live()));
  t.match(missing, { code: 'upstream_unavailable', transient: true });
});

t.test('models other than GPT image ones are asked for b64_json', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'flux-pro' });
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  await generator.generate(input(), live());
  t.match(JSON.parse(upstream.requests[0].body.toString()), {
    model: 'flux-pro',
    response_format: 'b64_json',
    size: '1264x848',
  });
});

/** The `size` of a request, JSON or multipart. */
async function sizeOf(request: ReceivedRequest): Promise<unknown> {
  if (request.url === '/v1/images/edits') return (await formOf(request)).get('size');
  return JSON.parse(request.body.toString()).size;
}

t.test('each model is asked for a size it accepts; the result has the catalog size and says from what', async (t) => {
  const cases: { model: string; imageSizes?: string; cell: Partial<GenerationInput>; asked: string }[] = [
    { model: 'gpt-image-1', cell: {}, asked: '1536x1024' },
    { model: 'gpt-image-1.5', cell: { aspectRatio: '4:5', width: 928, height: 1152 }, asked: '1024x1536' },
    {
      model: 'gpt-image-1',
      cell: { aspectRatio: '21:9', resolution: '2K', width: 3168, height: 1344 },
      asked: '1536x1024',
    },
    {
      model: 'gpt-image-2',
      cell: { aspectRatio: '1:1', resolution: '4K', width: 4096, height: 4096 },
      asked: '2880x2880',
    },
    { model: 'dall-e-3', cell: { aspectRatio: '9:16', width: 768, height: 1376 }, asked: '1024x1792' },
    { model: 'dall-e-2', cell: {}, asked: '1024x1024' },
    { model: 'flux-pro', imageSizes: '1024x1024,1344x768,768x1344', cell: {}, asked: '1344x768' },
  ];
  for (const { model, imageSizes, cell, asked } of cases) {
    const { upstream, generator } = await setup(t, { model, imageSizes });
    const [width, height] = asked.split('x').map(Number);
    upstream.replyWith(openAiReply.image(await pngBase64(width, height)));
    const [image] = await generator.generate(input(cell), live());
    t.equal(await sizeOf(upstream.requests[0]), asked, `${model} ${cell.aspectRatio ?? '3:2'} asks for ${asked}`);
    const metadata = await sharp(image.bytes).metadata();
    const expected = input(cell);
    t.same([metadata.width, metadata.height], [expected.width, expected.height], 'the exact catalog size');
    t.same(image.resizedFrom, { width, height });
  }
});

t.test('image-to-image asks images.edit for an accepted size too', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'gpt-image-1' });
  upstream.replyWith(openAiReply.image(await pngBase64(1024, 1536)));
  const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  const [image] = await generator.generate(
    input({ aspectRatio: '9:16', resolution: '2K', width: 1536, height: 2752, references: [png] }),
    live(),
  );
  t.equal(await sizeOf(upstream.requests[0]), '1024x1536');
  t.same([image.width, image.height, image.resizedFrom], [1536, 2752, { width: 1024, height: 1536 }]);
});

t.test('the fake refuses a size the model does not make, as OpenAI does: upstream_rejected', async (t) => {
  // OPENAI_IMAGE_SIZES=exact on a GPT image model: the catalog size goes out as is, and is refused.
  const { upstream, generator } = await setup(t, { model: 'gpt-image-1', imageSizes: 'exact' });
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  const error = await rejection(generator.generate(input(), live()));
  t.match(error, { code: 'upstream_rejected', transient: false, upstream: { status: 400, reason: 'invalid_value' } });
  t.equal(upstream.refused.length, 1);
});

t.test('image-to-image is one images.edit with every reference as an image[] file', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  const webp = await sharp({ create: { width: 30, height: 40, channels: 3, background: '#00ff00' } })
    .webp()
    .toBuffer();

  await generator.generate(input({ references: [png, webp] }), live());

  const [request] = upstream.requests;
  t.equal(request.url, '/v1/images/edits');
  t.equal(request.headers.authorization, `Bearer ${API_KEY}`);
  t.match(request.headers['content-type'], /^multipart\/form-data; boundary=/);
  const form = await formOf(request);
  t.equal(form.get('model'), 'gpt-image-2');
  t.equal(form.get('prompt'), 'a tin robot reading a newspaper');
  t.equal(form.get('size'), '1264x848');
  t.equal(form.get('n'), '1');
  const files = form.getAll('image[]') as File[];
  t.equal(files.length, 2);
  t.same(
    files.map((f) => f.type),
    ['image/png', 'image/webp'],
  );
  t.ok(Buffer.from(await files[0].arrayBuffer()).equals(png), 'first reference bytes as stored');
  t.ok(Buffer.from(await files[1].arrayBuffer()).equals(webp), 'second reference bytes as stored');
});

t.test('an image of another size is resized to the catalog size, and says from what', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  const [image] = await generator.generate(input(), live());
  const metadata = await sharp(image.bytes).metadata();
  t.same([metadata.format, metadata.width, metadata.height], ['png', 1264, 848]);
  t.same(image.resizedFrom, { width: 1536, height: 1024 });
});

t.test('moderation_blocked is a permanent content_policy failure without the upstream text', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.moderationBlocked());
  const error = await rejection(generator.generate(input(), live()));
  t.ok(error instanceof GenerationError);
  t.match(error, { code: 'content_policy', transient: false, upstream: { status: 400, reason: 'moderation_blocked' } });
  t.notMatch((error as Error).message, /req_internal|safety system/);
});

t.test('another 400 is a permanent upstream_rejected', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    openAiReply.error(400, {
      message: "Invalid value: '6336x2688'.",
      type: 'invalid_request_error',
      param: 'size',
      code: 'invalid_value',
    }),
  );
  const error = await rejection(generator.generate(input(), live()));
  t.match(error, { code: 'upstream_rejected', transient: false });
  t.notMatch((error as Error).message, /6336/);
});

t.test('429 is transient and carries Retry-After; 429 insufficient_quota is permanent', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    openAiReply.error(
      429,
      { message: 'Rate limit reached for images per minute.', type: 'requests', code: 'rate_limit_exceeded' },
      { 'retry-after': '12' },
    ),
    openAiReply.error(429, {
      message: 'You exceeded your current quota.',
      type: 'insufficient_quota',
      code: 'insufficient_quota',
    }),
  );
  t.match(await rejection(generator.generate(input(), live())), {
    code: 'upstream_rate_limited',
    transient: true,
    retryAfterMs: 12_000,
  });
  t.match(await rejection(generator.generate(input(), live())), { code: 'generator_unavailable', transient: false });
});

t.test('500 is transient, and the next call succeeds', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    openAiReply.error(500, {
      message: 'The server had an error while processing your request.',
      type: 'server_error',
      code: null,
    }),
    openAiReply.image(await pngBase64(1264, 848)),
  );
  t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_unavailable', transient: true });
  const [image] = await generator.generate(input(), live());
  t.same([image.width, image.height], [1264, 848]);
  t.equal(upstream.requests.length, 2, 'no hidden SDK retries');
});

t.test('a reply without an image is upstream_no_image, worth one more try', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(openAiReply.empty());
  t.match(await rejection(generator.generate(input(), live())), {
    code: 'upstream_no_image',
    transient: true,
    maxAttempts: 2,
  });
});

t.test('an unreachable upstream is transient upstream_unavailable', async (t) => {
  // A loopback port nobody listens on.
  const baseUrl = `http://127.0.0.1:${await freePort()}/v1`;
  const generator = new OpenAiImagesGenerator({ apiKey: API_KEY, baseUrl, model: 'gpt-image-2', maxConcurrency: 1 });
  const error = await rejection(generator.generate(input(), live()));
  t.match(error, { code: 'upstream_unavailable', transient: true, upstream: { reason: 'ECONNREFUSED' } });
});

t.test('a hanging upstream is abandoned when the signal times out, and the connection is closed', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith({ hang: true });
  const signal = AbortSignal.timeout(200);
  const error = await rejection(generator.generate(input(), signal));
  t.equal(error, signal.reason, 'rejects with the timeout');
  await upstream.abandonedCount(1);
  t.equal(upstream.abandoned, 1, 'the provider saw the request abandoned');
});

t.test('calls in flight are capped per backend; the others wait for a slot', async (t) => {
  const { upstream, generator } = await setup(t, { maxConcurrency: 1 });
  upstream.replyWith({ hang: true }, openAiReply.image(await pngBase64(1264, 848)));
  const first = generator.generate(input(), live());
  const second = generator.generate(input(), live());
  await upstream.received(1);
  // A request of our own to the provider: by its answer the second call has had every chance to send.
  await fetch(`${upstream.url}/probe`, { method: 'POST' });
  t.equal(upstream.requests.filter((r) => r.url !== '/probe').length, 1, 'the second call waits');
  upstream.release(openAiReply.image(await pngBase64(1264, 848)));
  await Promise.all([first, second]);
  t.equal(upstream.requests.filter((r) => r.url !== '/probe').length, 2);
});

t.test("OpenAI's own models get the account's safety_identifier; the reply's usage is kept", async (t) => {
  const { upstream, generator } = await setup(t, { model: 'gpt-image-1' });
  upstream.replyWith(openAiReply.image(await pngBase64(1536, 1024)));
  const [image] = await generator.generate(input({ safetyIdentifier: 'a1b2c3' }), live());
  t.equal(JSON.parse(upstream.requests[0].body.toString()).safety_identifier, 'a1b2c3');
  t.same(image.usage, { inputTokens: 50, outputTokens: 50 });
  t.equal(upstream.refused.length, 0);
});

t.test('a compatible provider is not sent safety_identifier, which it may not know', async (t) => {
  const { upstream, generator } = await setup(t, { model: 'flux-pro' });
  upstream.replyWith(openAiReply.image(await pngBase64(1264, 848)));
  await generator.generate(input({ safetyIdentifier: 'a1b2c3' }), live());
  t.notOk('safety_identifier' in JSON.parse(upstream.requests[0].body.toString()));
});
