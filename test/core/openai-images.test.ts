import t from 'tap';
import { findModel } from '../../schemas/catalog.js';
import { acceptedSizes, cellOf, OPENAI_MAX_IMAGES, readOpenAiImageRequest } from '../../src/core/openai-images.js';

const alpha = findModel('alpha-pro')!;
const beta = findModel('beta-v5-pro')!;
const base = { model: 'alpha-pro', prompt: 'a lighthouse at dawn' };

t.test(
  'the size table: OpenAI sizes become catalog cells; auto is the default cell, or 2K for high quality',
  async (t) => {
    t.same(cellOf(alpha, '1024x1024', 'auto'), { aspectRatio: '1:1', resolution: '1K', width: 1024, height: 1024 });
    t.same(cellOf(alpha, '1536x1024', 'high'), { aspectRatio: '3:2', resolution: '1K', width: 1264, height: 848 });
    t.same(cellOf(beta, '1024x1536', 'auto'), { aspectRatio: '2:3', resolution: '1K', width: 848, height: 1264 });
    t.same(cellOf(alpha, undefined, 'auto'), { aspectRatio: '1:1', resolution: '1K', width: 1024, height: 1024 });
    t.same(cellOf(alpha, 'auto', 'high'), { aspectRatio: '1:1', resolution: '2K', width: 2048, height: 2048 });
    t.same(cellOf(beta, 'auto', 'hd'), { aspectRatio: '1:1', resolution: '2K', width: 2048, height: 2048 });
    t.same(cellOf(alpha, 'auto', 'low'), { aspectRatio: '1:1', resolution: '1K', width: 1024, height: 1024 });
  },
);

t.test(
  'every named size of OpenAI is the nearest cell at 1K: DALL·E 2 squares 1:1, DALL·E 3 wides 16:9 and 9:16',
  async (t) => {
    const cell = (size: string) => {
      const found = cellOf(beta, size, 'auto');
      return found && `${found.aspectRatio} ${found.resolution} ${found.width}x${found.height}`;
    };
    t.equal(cell('256x256'), '1:1 1K 1024x1024');
    t.equal(cell('512x512'), '1:1 1K 1024x1024');
    t.equal(cell('1792x1024'), '16:9 1K 1376x768');
    t.equal(cell('1024x1792'), '9:16 1K 768x1376');
    t.equal(cellOf(beta, '1792x1024', 'max')?.resolution, '1K', 'an explicit size decides; quality is ignored');
  },
);

t.test('quality with size auto: high and hd 2K, xhigh and max 4K or the highest the model has', async (t) => {
  const resolution = (model: typeof alpha, quality: Parameters<typeof cellOf>[2]) =>
    cellOf(model, 'auto', quality)?.resolution;
  for (const quality of ['auto', 'low', 'medium', 'standard'] as const)
    t.equal(resolution(alpha, quality), '1K', quality);
  for (const quality of ['high', 'hd'] as const) t.equal(resolution(alpha, quality), '2K', quality);
  for (const quality of ['xhigh', 'max'] as const) {
    t.equal(resolution(alpha, quality), '4K', `${quality}: alpha-pro has 4K`);
    t.equal(resolution(beta, quality), '2K', `${quality}: beta-v5-pro's highest is 2K`);
  }
});

t.test(
  'seed: an integer 0 to 4294967295, as JSON or multipart digits; anything else is refused by param',
  async (t) => {
    for (const [seed, read] of [
      [undefined, null],
      [null, null],
      [0, 0],
      [4294967295, 4294967295],
      ['4294967295', 4294967295],
      ['17', 17],
    ] as const) {
      const reading = readOpenAiImageRequest({ ...base, seed });
      t.equal(reading.outcome === 'ok' && reading.request.seed, read, `seed ${JSON.stringify(seed)}`);
    }
    for (const seed of [-1, 4294967296, 1.5, '1e3', '-1', '', 'x', true, {}])
      t.match(
        readOpenAiImageRequest({ ...base, seed }),
        { outcome: 'invalid', errors: [{ param: 'seed', message: /0 to 4294967295/ }] },
        `seed ${JSON.stringify(seed)}`,
      );
  },
);

t.test('any exact catalog WxH of the model is its cell; one the model lacks is none', async (t) => {
  t.same(cellOf(alpha, '5504x3072', 'auto'), { aspectRatio: '16:9', resolution: '4K', width: 5504, height: 3072 });
  t.equal(cellOf(beta, '5504x3072', 'auto'), null, 'beta-v5-pro has no 4K');
  t.equal(cellOf(beta, '928x1152', 'auto'), null, 'beta-v5-pro has no 4:5');
  for (const size of ['1000x1000', '1024X1024', ' 1024x1024', '01024x1024', 'x', '', 1024, {}])
    t.equal(cellOf(alpha, size, 'auto'), null, `${JSON.stringify(size)} is no size`);
});

t.test('acceptedSizes lists auto, the OpenAI sizes and every catalog size of the model once', async (t) => {
  const sizes = acceptedSizes(beta);
  t.same(sizes.slice(0, 8), [
    'auto',
    '256x256',
    '512x512',
    '1024x1024',
    '1536x1024',
    '1024x1536',
    '1792x1024',
    '1024x1792',
  ]);
  t.equal(new Set(sizes).size, sizes.length);
  t.ok(sizes.includes('3168x1344'));
  t.notOk(sizes.includes('6336x2688'));
});

t.test('a minimal body reads with OpenAI defaults: n 1, b64_json, png, quality auto, no user', async (t) => {
  const reading = readOpenAiImageRequest(base);
  t.equal(reading.outcome, 'ok');
  if (reading.outcome !== 'ok') return;
  t.match(reading.request, {
    n: 1,
    aspectRatio: '1:1',
    resolution: '1K',
    responseFormat: 'b64_json',
    outputFormat: 'png',
    outputCompression: null,
    quality: 'auto',
    user: null,
  });
});

t.test('multipart text fields (strings) read as their values; unknown fields are ignored', async (t) => {
  const reading = readOpenAiImageRequest({
    ...base,
    n: '3',
    output_compression: '80',
    output_format: 'webp',
    user: 'user-42',
    moderation: 'low',
    stream: 'false',
    partial_images: 2,
    style: 'vivid',
  });
  t.equal(reading.outcome, 'ok');
  if (reading.outcome === 'ok')
    t.match(reading.request, { n: 3, outputFormat: 'webp', outputCompression: 80, user: 'user-42' });
});

t.test('a missing model is a field error; an unknown one is model_not_found naming the models', async (t) => {
  t.match(readOpenAiImageRequest({ prompt: 'x y z' }), { outcome: 'invalid', errors: [{ param: 'model' }] });
  t.match(readOpenAiImageRequest({ ...base, model: 'dall-e-3' }), {
    outcome: 'model_not_found',
    message: /'dall-e-3'.*alpha-pro, beta-v5-pro/,
  });
});

t.test('every wrong field is reported, each by its param', async (t) => {
  const reading = readOpenAiImageRequest({
    model: 'beta-v5-pro',
    prompt: '  ',
    n: OPENAI_MAX_IMAGES + 1,
    size: '4096x4096',
    quality: 'ultra',
    output_format: 'gif',
    output_compression: 101,
    background: 'transparent',
    response_format: 'bytes',
    moderation: 'none',
    stream: true,
    user: 7,
  });
  t.equal(reading.outcome, 'invalid');
  if (reading.outcome !== 'invalid') return;
  t.same(
    reading.errors.map((e) => e.param),
    [
      'prompt',
      'n',
      'quality',
      'size',
      'output_format',
      'output_compression',
      'background',
      'response_format',
      'moderation',
      'stream',
      'user',
    ],
  );
  t.match(reading.errors.find((e) => e.param === 'background')?.message, /alpha channel/);
  t.match(
    reading.errors.find((e) => e.param === 'size')?.message,
    /auto, 256x256, 512x512, 1024x1024, 1536x1024, 1024x1536, 1792x1024, 1024x1792/,
  );
});

t.test('stream is a boolean: false is read, true is not offered, anything else is refused', async (t) => {
  for (const stream of [false, 'false', null, undefined])
    t.equal(readOpenAiImageRequest({ ...base, stream }).outcome, 'ok', `stream ${JSON.stringify(stream)}`);
  t.match(readOpenAiImageRequest({ ...base, stream: true }), {
    outcome: 'invalid',
    errors: [{ param: 'stream', message: /not offered/ }],
  });
  for (const stream of [1, 'yes', [[true]], {}])
    t.match(
      readOpenAiImageRequest({ ...base, stream }),
      { outcome: 'invalid', errors: [{ param: 'stream', message: /must be a boolean/ }] },
      `stream ${JSON.stringify(stream)}`,
    );
});

t.test('the prompt length is the model’s, in code points', async (t) => {
  t.match(readOpenAiImageRequest({ ...base, prompt: 'ab' }), { outcome: 'invalid', errors: [{ param: 'prompt' }] });
  t.equal(readOpenAiImageRequest({ ...base, prompt: '😀😀😀' }).outcome, 'ok', 'three code points suffice');
  t.match(readOpenAiImageRequest({ model: 'beta-v5-pro', prompt: 'a'.repeat(5001) }), {
    outcome: 'invalid',
    errors: [{ param: 'prompt', message: /3 to 5000/ }],
  });
});

t.test('an edit needs the model’s number of reference images', async (t) => {
  t.match(readOpenAiImageRequest(base, { referenceImages: 0 }), { outcome: 'invalid', errors: [{ param: 'image' }] });
  t.match(readOpenAiImageRequest(base, { referenceImages: 9 }), { outcome: 'invalid', errors: [{ param: 'image' }] });
  t.equal(readOpenAiImageRequest({ ...base, model: 'beta-v5-pro' }, { referenceImages: 10 }).outcome, 'ok');
});
