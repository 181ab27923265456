import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateImage } from 'ai';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import t from 'tap';
import { findModel } from '../../schemas/catalog.js';
import { cellOf, OPENAI_QUALITIES, OPENAI_SIZE_TABLE, type OpenAiQuality } from '../../src/core/openai-images.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { servingFileTestApp } from '../helpers/serving-file-app.js';

/**
 * The OpenAI face's whole vocabulary (docs/design.md §3.9): every `size` and `quality` the
 * installed `openai` SDK's types name is accepted through the SDK and answered at the catalog cell
 * the documented table names; a spent balance is 429 insufficient_quota without Retry-After; an
 * image part that is no image is OpenAI's 400 invalid_request_error naming `image`.
 */

/** The string literals of every `size?:` and `quality?:` field of the SDK's images types, so the list follows the SDK. */
function sdkLiterals(field: 'size' | 'quality'): string[] {
  // The package exports no package.json: its root is the nearest folder above its entry that has one.
  let root = dirname(createRequire(import.meta.url).resolve('openai'));
  while (!existsSync(join(root, 'package.json'))) root = dirname(root);
  const types = readFileSync(join(root, 'resources', 'images.d.ts'), 'utf8');
  const values = new Set<string>();
  for (const line of types.matchAll(new RegExp(`^\\s*${field}\\?: (.*);$`, 'gm')))
    for (const literal of line[1].matchAll(/'([^']+)'/g)) values.add(literal[1]);
  return [...values];
}

const SDK_SIZES = sdkLiterals('size');
const SDK_QUALITIES = sdkLiterals('quality');

const { fileApp, port } = await servingFileTestApp();
const baseURL = `http://127.0.0.1:${port}/v1`;

async function account(tokens = 10_000) {
  const harness = fileApp();
  const created = await harness.newAccount(tokens);
  return { ...harness, ...created, openai: new OpenAI({ baseURL, apiKey: created.key }) };
}

const beta = findModel('beta-v5-pro')!;

t.test('the SDK types are read: every size and quality they name is one this face knows', async (t) => {
  t.ok(SDK_SIZES.length >= 8 && SDK_QUALITIES.length >= 8, `${SDK_SIZES.join(' ')} / ${SDK_QUALITIES.join(' ')}`);
  for (const size of SDK_SIZES) t.ok(size === 'auto' || size in OPENAI_SIZE_TABLE, `size ${size} is in the size table`);
  for (const quality of SDK_QUALITIES)
    t.ok((OPENAI_QUALITIES as readonly string[]).includes(quality), `quality ${quality} is in the quality table`);
});

t.test('openai SDK: every size of its types is answered at the nearest catalog cell, and says so', async (t) => {
  const h = await account();
  for (const size of SDK_SIZES) {
    const result = await h.openai.images.generate({
      model: 'beta-v5-pro',
      prompt: `a lighthouse at ${size}`,
      size: size as OpenAI.ImageGenerateParams['size'],
    });
    const cell = cellOf(beta, size, 'auto');
    const image = await sharp(Buffer.from(result.data?.[0].b64_json ?? '', 'base64')).metadata();
    t.equal(result.size, `${cell?.width}x${cell?.height}`, `${size}: the answer states the size made`);
    t.same([image.width, image.height], [cell?.width, cell?.height], `${size}: the image is that size`);
  }
  await assertLedgerInvariant(t, h.store, h.accountId);
});

t.test('openai SDK: every quality of its types is accepted; with size auto it picks the resolution', async (t) => {
  const h = await account();
  for (const quality of SDK_QUALITIES) {
    const result = await h.openai.images.generate({
      model: 'beta-v5-pro',
      prompt: `a lighthouse in ${quality} quality`,
      quality: quality as OpenAI.ImageGenerateParams['quality'],
    });
    const cell = cellOf(beta, 'auto', quality as OpenAiQuality);
    t.equal(result.size, `${cell?.width}x${cell?.height}`, `${quality}: ${cell?.resolution}`);
    t.equal(result.quality, quality, `${quality}: echoed`);
  }
});

t.test('a spent balance is 429 insufficient_quota without Retry-After: the openai SDK does not retry', async (t) => {
  const h = await account(10);
  const seen: string[] = [];
  const counting = new OpenAI({
    baseURL,
    apiKey: h.key,
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(url, init);
      seen.push(response.headers.get('retry-after') ?? 'none');
      return response;
    },
  });
  const error = await counting.images
    .generate({ model: 'alpha-pro', prompt: 'one lighthouse' })
    .catch((e: unknown) => e);
  t.ok(error instanceof OpenAI.RateLimitError);
  t.match(error, { status: 429, code: 'insufficient_quota', type: 'insufficient_quota' });
  t.same(seen, ['none'], 'one request, no Retry-After');
});

t.test('AI SDK: insufficient_quota arrives without Retry-After and names its code', async (t) => {
  const h = await account(10);
  const started = Date.now();
  const error = (await generateImage({
    model: createOpenAICompatible({ name: 'imagegen', baseURL, apiKey: h.key }).imageModel('alpha-pro'),
    prompt: 'one lighthouse',
    // The AI SDK retries every 429 by its status (APICallError); a retry is refused the same way.
    maxRetries: 0,
  }).catch((e: unknown) => e)) as { statusCode?: number; responseHeaders?: Record<string, string>; data?: unknown };
  t.equal(error.statusCode, 429);
  t.match(error.data, { error: { code: 'insufficient_quota', type: 'insufficient_quota' } });
  t.equal(error.responseHeaders?.['retry-after'], undefined, 'no Retry-After');
  t.ok(Date.now() - started < 5000, 'fails at once');
  t.equal((await h.store.accounts.getAccount(h.accountId))?.balance, 10, 'nothing charged');
});

t.test('an image part that is no image is a BadRequestError invalid_request_error naming param image', async (t) => {
  const h = await account();
  for (const [label, bytes] of [
    ['text', Buffer.from('this is not an image at all')],
    ['a cut PNG', (await encodedImage('png', 64, 64)).subarray(0, 60)],
  ] as const) {
    const error = await h.openai.images
      .edit({
        model: 'alpha-pro',
        prompt: 'the same, at night',
        image: await toFile(bytes, 'picture.png', { type: 'image/png' }),
      })
      .catch((e: unknown) => e);
    t.ok(error instanceof OpenAI.BadRequestError, `${label}: BadRequestError`);
    t.match(error, { status: 400, type: 'invalid_request_error', param: 'image' }, label);
  }
  t.equal((await h.store.tasks.listTasks(h.accountId, { limit: 10 })).items.length, 0, 'no task made');
  await assertLedgerInvariant(t, h.store, h.accountId);
});
