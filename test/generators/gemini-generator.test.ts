import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import t, { type Test } from 'tap';
import { GeminiGenerator } from '../../src/generators/gemini-generator.js';
import { GenerationError, type GenerationInput } from '../../src/generators/port.js';
import { FakeUpstream, pngBase64 } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/processes.js';
import { geminiReply } from '../helpers/provider-replies.js';
import { imageGeneratorContract } from './generator-contract.js';

const API_KEY = 'gemini-test-key-do-not-log';
// A fresh signal per call: the SDK leaves a listener on the signal it was given for as long as it lives.
const live = () => new AbortController().signal;

const input = (overrides: Partial<GenerationInput> = {}): GenerationInput => ({
  model: 'alpha-pro',
  prompt: 'a lighthouse on a cliff at dusk',
  aspectRatio: '16:9',
  resolution: '2K',
  width: 2752,
  height: 1536,
  references: [],
  ...overrides,
});

async function setup(t: Test, options: { maxConcurrency?: number; model?: string } = {}) {
  const upstream = await FakeUpstream.start(t);
  const generator = new GeminiGenerator({
    apiKey: API_KEY,
    baseUrl: upstream.url,
    model: options.model ?? 'gemini-3-pro-image-preview',
    maxConcurrency: options.maxConcurrency ?? 4,
  });
  return { upstream, generator };
}

function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

t.test('contract', async (t) => {
  const upstream = await FakeUpstream.start(t);
  // A 1K square image whatever was asked: every contract size is reached by resizing.
  upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
  imageGeneratorContract(
    t,
    () =>
      new GeminiGenerator({
        apiKey: API_KEY,
        baseUrl: upstream.url,
        model: 'gemini-3-pro-image-preview',
        maxConcurrency: 4,
      }),
  );
});

t.test('sends one generateContent with the prompt, the references inline and the imageConfig', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  const jpeg = await sharp({ create: { width: 30, height: 40, channels: 3, background: '#00ff00' } })
    .jpeg()
    .toBuffer();

  await generator.generate(input({ references: [png, jpeg] }), live());

  t.equal(upstream.requests.length, 1);
  const [request] = upstream.requests;
  t.equal(request.method, 'POST');
  t.equal(request.url, '/v1beta/models/gemini-3-pro-image-preview:generateContent');
  t.equal(request.headers['x-goog-api-key'], API_KEY);
  t.match(request.headers['content-type'], /^application\/json/);
  t.same(JSON.parse(request.body.toString()), {
    contents: [
      {
        role: 'user',
        parts: [
          { text: 'a lighthouse on a cliff at dusk' },
          { inlineData: { mimeType: 'image/png', data: png.toString('base64') } },
          { inlineData: { mimeType: 'image/jpeg', data: jpeg.toString('base64') } },
        ],
      },
    ],
    generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
  });
});

t.test(
  'a model without imageSize (Gemini 2.5 Flash Image) gets aspectRatio only; 2K is resized from its 1K',
  async (t) => {
    const { upstream, generator } = await setup(t, { model: 'gemini-2.5-flash-image' });
    // The model's own 16:9 size.
    upstream.replyWith(geminiReply.image(await pngBase64(1344, 768)));
    const [image] = await generator.generate(input(), live());
    t.equal(upstream.refused.length, 0, 'the provider took the request');
    t.equal(upstream.requests[0].url, '/v1beta/models/gemini-2.5-flash-image:generateContent');
    t.same(JSON.parse(upstream.requests[0].body.toString()).generationConfig.imageConfig, { aspectRatio: '16:9' });
    const metadata = await sharp(image.bytes).metadata();
    t.same([metadata.width, metadata.height], [2752, 1536]);
    t.same(image.resizedFrom, { width: 1344, height: 768 });
  },
);

t.test('the seed goes as generationConfig.seed, a signed 32-bit integer; none without one', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  for (const seed of [0, 7, 2_147_483_647, 2_147_483_648, 4_294_967_295, undefined])
    await generator.generate(input(seed === undefined ? {} : { seed }), live());
  t.same(
    upstream.requests.map((request) => JSON.parse(request.body.toString()).generationConfig.seed),
    [0, 7, 2_147_483_647, -2_147_483_648, -1, undefined],
  );
  t.equal(upstream.refused.length, 0, 'the fake, like Gemini, takes every one');
});

t.test('the fake refuses imageSize for a model without it, as Gemini does', async (t) => {
  const upstream = await FakeUpstream.start(t);
  const response = await fetch(`${upstream.url}/v1beta/models/gemini-2.5-flash-image:generateContent`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': API_KEY },
    body: JSON.stringify({
      contents: [{ role: 'user', parts: [{ text: 'x' }] }],
      generationConfig: { imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
    }),
  });
  t.equal(response.status, 400);
  t.match(await response.json(), { error: { code: 400, status: 'INVALID_ARGUMENT' } });
});

t.test('an image of the exact size is kept byte for byte', async (t) => {
  const { upstream, generator } = await setup(t);
  const served = await pngBase64(2752, 1536);
  upstream.replyWith(geminiReply.image(served));
  const [image] = await generator.generate(input(), live());
  t.ok(image.bytes.equals(Buffer.from(served, 'base64')));
  t.equal(image.resizedFrom, undefined);
});

t.test('an image of another size is resized and centre-cropped to the catalog size, and says from what', async (t) => {
  const { upstream, generator } = await setup(t);
  // 1:1 with a red left third, white middle and blue right third: a 16:9 cover crop keeps the middle.
  const third = 1024 / 4;
  const square = await sharp({ create: { width: 1024, height: 1024, channels: 3, background: '#ffffff' } })
    .composite([
      { input: { create: { width: third, height: 1024, channels: 3, background: '#ff0000' } }, left: 0, top: 0 },
      {
        input: { create: { width: third, height: 1024, channels: 3, background: '#0000ff' } },
        left: 1024 - third,
        top: 0,
      },
    ])
    .png()
    .toBuffer();
  upstream.replyWith(geminiReply.image(square.toString('base64')));

  const [image] = await generator.generate(input({ width: 1376, height: 768, resolution: '1K' }), live());

  const { data, info } = await sharp(image.bytes).raw().toBuffer({ resolveWithObject: true });
  t.same([info.width, info.height, image.width, image.height], [1376, 768, 1376, 768]);
  t.same(image.resizedFrom, { width: 1024, height: 1024 });
  t.equal((await sharp(image.bytes).metadata()).format, 'png');
  const centre = (384 * info.width + 688) * info.channels;
  t.same([...data.subarray(centre, centre + 3)], [255, 255, 255], 'the centre of the model image is kept');
});

t.test('a JPEG of the exact size is re-encoded as PNG without resizing', async (t) => {
  const { upstream, generator } = await setup(t);
  const jpeg = await sharp({ create: { width: 2752, height: 1536, channels: 3, background: '#336699' } })
    .jpeg()
    .toBuffer();
  upstream.replyWith(geminiReply.image(jpeg.toString('base64'), 'image/jpeg'));
  const [image] = await generator.generate(input(), live());
  t.equal((await sharp(image.bytes).metadata()).format, 'png');
  t.equal(image.resizedFrom, undefined);
});

t.test('interim thought images are skipped for the final image', async (t) => {
  const { upstream, generator } = await setup(t);
  const final = await pngBase64(2752, 1536, '#00aa00');
  upstream.replyWith(geminiReply.thoughtThenImage(await pngBase64(64, 64, '#aa0000'), final));
  const [image] = await generator.generate(input(), live());
  t.ok(image.bytes.equals(Buffer.from(final, 'base64')));
});

t.test('a blocked prompt is a permanent content_policy failure without the upstream text', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.promptBlocked('PROHIBITED_CONTENT'));
  const error = await rejection(generator.generate(input(), live()));
  t.ok(error instanceof GenerationError);
  t.match(error, { code: 'content_policy', transient: false });
  t.notMatch((error as Error).message, /PROHIBITED/);
});

t.test('a blocked image (finishReason IMAGE_SAFETY) is content_policy', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.imageBlocked());
  t.match(await rejection(generator.generate(input(), live())), { code: 'content_policy', transient: false });
});

t.test('a reply without an image is upstream_no_image, worth one more try, without the model text', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.textOnly());
  const error = await rejection(generator.generate(input(), live()));
  t.match(error, { code: 'upstream_no_image', transient: true, maxAttempts: 2 });
  t.notMatch((error as Error).message, /sk-secret/);
});

t.test('an image that does not decode is transient upstream_invalid_image', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(Buffer.from('not a png at all').toString('base64')));
  t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_invalid_image', transient: true });
});

t.test('429 is transient and carries Retry-After', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    geminiReply.error(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).', {
      'retry-after': '7',
    }),
  );
  const error = await rejection(generator.generate(input(), live()));
  t.match(error, {
    code: 'upstream_rate_limited',
    transient: true,
    retryAfterMs: 7000,
    upstream: { status: 429, reason: 'RESOURCE_EXHAUSTED' },
  });
  t.notMatch((error as Error).message, /exhausted/);
});

t.test('429 without Retry-After takes the wait from google.rpc.RetryInfo', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    geminiReply.error(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded.', undefined, [
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '37s' },
    ]),
  );
  t.match(await rejection(generator.generate(input(), live())), {
    code: 'upstream_rate_limited',
    retryAfterMs: 37_000,
  });
});

t.test('500 is transient, and the next call succeeds', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(
    geminiReply.error(500, 'INTERNAL', 'An internal error has occurred.'),
    geminiReply.image(await pngBase64(2752, 1536)),
  );
  t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_unavailable', transient: true });
  const [image] = await generator.generate(input(), live());
  t.same([image.width, image.height], [2752, 1536]);
  t.equal(upstream.requests.length, 2, 'no hidden SDK retries');
});

t.test(
  '400 INVALID_ARGUMENT is a permanent upstream_rejected; 403 is generator_unavailable (more: provider-failures.test.ts)',
  async (t) => {
    const { upstream, generator } = await setup(t);
    upstream.replyWith(
      geminiReply.error(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.'),
      geminiReply.error(403, 'PERMISSION_DENIED', 'API key not valid.'),
    );
    t.match(await rejection(generator.generate(input(), live())), { code: 'upstream_rejected', transient: false });
    t.match(await rejection(generator.generate(input(), live())), { code: 'generator_unavailable', transient: false });
  },
);

t.test('an unreachable upstream is transient upstream_unavailable', async (t) => {
  const { upstream } = await setup(t);
  // A loopback port nobody listens on.
  const closed = new GeminiGenerator({
    apiKey: API_KEY,
    baseUrl: `http://127.0.0.1:${await freePort()}`,
    model: 'm',
    maxConcurrency: 1,
  });
  const error = await rejection(closed.generate(input(), live()));
  t.match(error, { code: 'upstream_unavailable', transient: true, upstream: { reason: 'ECONNREFUSED' } });
  t.equal(upstream.requests.length, 0);
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
  upstream.replyWith({ hang: true }, geminiReply.image(await pngBase64(2752, 1536)));
  const first = generator.generate(input(), live());
  const second = generator.generate(input(), live());
  await upstream.received(1);
  // A request of our own to the provider: by its answer the second call has had every chance to send.
  await fetch(`${upstream.url}/probe`, { method: 'POST' });
  t.equal(upstream.requests.filter((r) => r.url !== '/probe').length, 1, 'the second call waits');
  upstream.release(geminiReply.image(await pngBase64(2752, 1536)));
  await Promise.all([first, second]);
  t.equal(upstream.requests.filter((r) => r.url !== '/probe').length, 2);
});

t.test('a call waiting for a slot leaves the queue when aborted, without sending', async (t) => {
  const { upstream, generator } = await setup(t, { maxConcurrency: 1 });
  upstream.replyWith({ hang: true });
  const first = generator.generate(input(), live());
  await upstream.received(1);
  const controller = new AbortController();
  const waiting = generator.generate(input(), controller.signal);
  const reason = new Error('canceled');
  controller.abort(reason);
  t.equal(await rejection(waiting), reason);
  upstream.release(geminiReply.image(await pngBase64(2752, 1536)));
  await first;
  t.equal(upstream.requests.length, 1, 'the aborted call never reached the provider');
});

t.test('a reply that would need more than maxUpscale is refused, not enlarged: upscale_exceeded, final', async (t) => {
  const upstream = await FakeUpstream.start(t);
  const generator = new GeminiGenerator({
    apiKey: API_KEY,
    baseUrl: upstream.url,
    model: 'gemini-3-pro-image-preview',
    maxConcurrency: 1,
    maxUpscale: 2,
  });
  // 2752×1536 from 1024²: ×2.69.
  upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)), geminiReply.image(await pngBase64(1376, 768)));
  t.match(await rejection(generator.generate(input(), live())), { code: 'upscale_exceeded', transient: false });
  const [image] = await generator.generate(input(), live());
  t.same(image.resizedFrom, { width: 1376, height: 768 }, '×2 is allowed');
});

t.test("the reply's usageMetadata is kept as the call's tokens", async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  const [image] = await generator.generate(input(), live());
  t.same(image.usage, { inputTokens: 12, outputTokens: 1120 });
});

t.test('references are prepared within the per-image limit and the request budget, in order', async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  // Noise does not compress: a 1600×1200 PNG of it is ~5.8 MB; ten of them would be ~77 MB in base64.
  const noise = randomBytes(1600 * 1200 * 3);
  const big = await sharp(noise, { raw: { width: 1600, height: 1200, channels: 3 } })
    .png()
    .toBuffer();
  const small = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
  t.ok(big.length > 5_000_000, `a large reference (${big.length} bytes)`);
  const references = [small, ...Array.from({ length: 9 }, () => big)];

  await generator.generate(input({ references }), live());

  t.equal(upstream.refused.length, 0, 'within the 20 MB request limit');
  const parts = JSON.parse(upstream.requests[0].body.toString()).contents[0].parts.slice(1) as {
    inlineData: { mimeType: string; data: string };
  }[];
  t.equal(parts.length, 10);
  t.ok(Buffer.from(parts[0].inlineData.data, 'base64').equals(small), 'a small reference goes as stored');
  for (const part of parts.slice(1)) {
    const bytes = Buffer.from(part.inlineData.data, 'base64');
    t.ok(bytes.length <= 1_400_000, `each within its share (${bytes.length} bytes)`);
    const metadata = await sharp(bytes).metadata();
    t.equal(part.inlineData.mimeType, 'image/jpeg');
    t.ok((metadata.width ?? 0) <= 1600 && Math.abs((metadata.width ?? 0) / (metadata.height ?? 1) - 4 / 3) < 0.01);
  }
});

t.test('a request over the Gemini API limit is refused by the fake as by the provider', async (t) => {
  const { upstream } = await setup(t);
  const response = await fetch(`${upstream.url}/v1beta/models/gemini-3-pro-image-preview:generateContent`, {
    method: 'POST',
    body: JSON.stringify({ pad: 'x'.repeat(21 * 1024 * 1024) }),
  });
  t.equal(response.status, 400);
  t.match(await response.json(), { error: { status: 'INVALID_ARGUMENT' } });
});

t.test('Vertex AI by configuration: the project and location path, a Google Cloud token, the same body', async (t) => {
  const upstream = await FakeUpstream.start(t);
  const vertex = (token?: string) =>
    new GeminiGenerator({
      vertex: {
        project: 'my-project',
        location: 'global',
        // The credentials as Application Default Credentials would give them: a fixed access token.
        googleAuthOptions: {
          authClient: {
            getRequestHeaders: async () => new Headers(token ? { authorization: `Bearer ${token}` } : {}),
          } as never,
        },
      },
      baseUrl: upstream.url,
      model: 'gemini-3-pro-image-preview',
      maxConcurrency: 1,
    });
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  await vertex('ya29.vertex-test-token').generate(input(), live());
  const [request] = upstream.requests;
  t.equal(
    request.url,
    '/v1beta1/projects/my-project/locations/global/publishers/google/models/gemini-3-pro-image-preview:generateContent',
  );
  t.equal(request.headers.authorization, 'Bearer ya29.vertex-test-token');
  t.equal(request.headers['x-goog-api-key'], undefined, 'no API key');
  t.same(JSON.parse(request.body.toString()).generationConfig.imageConfig, { aspectRatio: '16:9', imageSize: '2K' });
  t.equal(upstream.refused.length, 0);

  // Without a token Vertex answers 401 UNAUTHENTICATED: the operator's problem.
  t.match(
    await vertex()
      .generate(input(), live())
      .catch((e: unknown) => e),
    {
      code: 'generator_unavailable',
      transient: false,
    },
  );
  t.equal(upstream.refused.length, 1);
});

t.test("a reply of the exact size is encoded in the task's lossy format, not kept as PNG", async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(2752, 1536)));
  const [image] = await generator.generate(input({ outputFormat: 'webp', outputCompression: 70 }), live());
  t.equal(image.contentType, 'image/webp');
  const metadata = await sharp(image.bytes).metadata();
  t.same([metadata.format, metadata.width, metadata.height], ['webp', 2752, 1536]);
  t.equal(image.resizedFrom, undefined);
});

t.test("a reply of another size is resized, cropped and encoded in the task's format", async (t) => {
  const { upstream, generator } = await setup(t);
  upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
  const [image] = await generator.generate(
    input({ width: 1376, height: 768, resolution: '1K', outputFormat: 'jpeg', outputCompression: 50 }),
    live(),
  );
  t.equal(image.contentType, 'image/jpeg');
  const metadata = await sharp(image.bytes).metadata();
  t.same([metadata.format, metadata.width, metadata.height], ['jpeg', 1376, 768]);
  t.same(image.resizedFrom, { width: 1024, height: 1024 });
});
