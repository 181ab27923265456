import t from 'tap';
import { alphaPro as alphaProModule } from '../../schemas/models/alpha-pro.js';
import { betaV5Pro as betaV5ProModule } from '../../schemas/models/beta-v5-pro.js';
import type { ModelCatalogEntry } from '../../schemas/model-entry.js';
import { DEFAULT_OUTPUT_COMPRESSION } from '../../schemas/output-format.js';
import { applyDefaults, pixelSizeOf, priceOf, priceRequest } from '../../src/core/pricing.js';

const alphaPro = alphaProModule.entry;
const betaV5Pro = betaV5ProModule.entry;

// docs/design.md §3.1, written out here on purpose: the catalog is checked against the seed, not against itself.
const SEED_PRICES: { model: ModelCatalogEntry; id: string; resolution: string; cost: number }[] = [
  { model: alphaPro, id: 'alpha-pro', resolution: '1K', cost: 25 },
  { model: alphaPro, id: 'alpha-pro', resolution: '2K', cost: 25 },
  { model: alphaPro, id: 'alpha-pro', resolution: '4K', cost: 50 },
  { model: betaV5Pro, id: 'beta-v5-pro', resolution: '1K', cost: 25 },
  { model: betaV5Pro, id: 'beta-v5-pro', resolution: '2K', cost: 50 },
];

// docs/design.md §3.2, a sample of rows: [ratio, resolution, width, height].
const PIXEL_ROWS: [string, string, number, number][] = [
  ['1:1', '1K', 1024, 1024],
  ['2:3', '2K', 1696, 2528],
  ['3:2', '4K', 5056, 3392],
  ['4:5', '1K', 928, 1152],
  ['5:4', '4K', 4608, 3712],
  ['9:16', '2K', 1536, 2752],
  ['16:9', '1K', 1376, 768],
  ['21:9', '4K', 6336, 2688],
];

for (const row of SEED_PRICES) {
  t.test(`priceOf ${row.id} at ${row.resolution} is ${row.cost} tokens`, async (t) => {
    t.equal(priceOf(row.model, row.resolution), row.cost);
  });
}

t.test('priceOf refuses a resolution the model does not offer', async (t) => {
  t.throws(() => priceOf(betaV5Pro, '4K'));
  t.throws(() => priceOf(alphaPro, '8K'));
  t.throws(() => priceOf(alphaPro, '1k'));
});

t.test('the catalog entries carry the seed limits', async (t) => {
  t.same(alphaPro.promptLength, { min: 3, max: 10000 });
  t.same(alphaPro.imageReferenceCount, { min: 1, max: 8 });
  t.same(
    [...alphaPro.aspectRatios].sort(),
    ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'].sort(),
  );
  t.same([...alphaPro.resolutions], ['1K', '2K', '4K']);
  t.same(betaV5Pro.promptLength, { min: 3, max: 5000 });
  t.same(betaV5Pro.imageReferenceCount, { min: 1, max: 10 });
  t.same([...betaV5Pro.aspectRatios].sort(), ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'].sort());
  t.same([...betaV5Pro.resolutions], ['1K', '2K']);
});

t.test('applyDefaults fills 1:1 and 1K when parameters are absent', async (t) => {
  t.strictSame(applyDefaults(alphaPro, undefined), {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.strictSame(applyDefaults(betaV5Pro, undefined), {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
});

t.test('applyDefaults fills both keys of an empty object', async (t) => {
  t.strictSame(applyDefaults(alphaPro, {}), {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.strictSame(applyDefaults(betaV5Pro, {}), {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
});

t.test('applyDefaults fills only the missing key', async (t) => {
  t.strictSame(applyDefaults(alphaPro, { resolution: '4K' }), {
    aspect_ratio: '1:1',
    resolution: '4K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.strictSame(applyDefaults(betaV5Pro, { aspect_ratio: '16:9' }), {
    aspect_ratio: '16:9',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
});

t.test('applyDefaults keeps both given keys', async (t) => {
  t.strictSame(applyDefaults(alphaPro, { aspect_ratio: '21:9', resolution: '2K' }), {
    aspect_ratio: '21:9',
    resolution: '2K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
});

for (const [ratio, resolution, width, height] of PIXEL_ROWS) {
  t.test(`pixelSizeOf alpha-pro ${ratio} ${resolution} is ${width}x${height}`, async (t) => {
    t.strictSame(pixelSizeOf(alphaPro, { aspect_ratio: ratio, resolution }), { width, height });
  });
}

t.test('pixelSizeOf refuses what beta-v5-pro does not offer', async (t) => {
  t.throws(() => pixelSizeOf(betaV5Pro, { aspect_ratio: '4:5', resolution: '1K' }));
  t.throws(() => pixelSizeOf(betaV5Pro, { aspect_ratio: '1:1', resolution: '4K' }));
});

t.test('priceRequest applies defaults, prices and sizes in one step', async (t) => {
  const priced = priceRequest('beta-v5-pro', { resolution: '2K' });
  t.equal(priced.model.id, 'beta-v5-pro');
  t.strictSame(priced.parameters, {
    aspect_ratio: '1:1',
    resolution: '2K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.equal(priced.cost, 50);
  t.equal(priced.width, 2048);
  t.equal(priced.height, 2048);
});

t.test('priceRequest with no parameters is the 1K square at 25 tokens', async (t) => {
  const priced = priceRequest('alpha-pro', undefined);
  t.strictSame(priced.parameters, {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'png',
    output_compression: null,
    seed: null,
  });
  t.equal(priced.cost, 25);
  t.equal(priced.width, 1024);
  t.equal(priced.height, 1024);
});

t.test('priceRequest of an unknown model is a programming error', async (t) => {
  t.throws(() => priceRequest('gamma', undefined));
});

t.test('applyDefaults: a lossy format gets the default compression, png gets none', async (t) => {
  t.strictSame(applyDefaults(alphaPro, { output_format: 'webp' }), {
    aspect_ratio: '1:1',
    resolution: '1K',
    output_format: 'webp',
    output_compression: DEFAULT_OUTPUT_COMPRESSION,
    seed: null,
  });
  t.equal(applyDefaults(betaV5Pro, { output_format: 'jpeg', output_compression: 35 }).output_compression, 35);
  t.equal(applyDefaults(betaV5Pro, { output_format: 'png' }).output_compression, null);
});

t.test('the output format does not change the price or the pixel size', async (t) => {
  const png = priceRequest('alpha-pro', { aspect_ratio: '16:9', resolution: '4K' });
  for (const output_format of ['jpeg', 'webp'] as const) {
    const other = priceRequest('alpha-pro', { aspect_ratio: '16:9', resolution: '4K', output_format });
    t.equal(other.cost, png.cost);
    t.strictSame([other.width, other.height], [png.width, png.height]);
  }
});

t.test('applyDefaults refuses output_compression without a lossy format, naming the field', async (t) => {
  for (const parameters of [{ output_compression: 80 }, { output_format: 'png' as const, output_compression: 0 }]) {
    t.throws(() => applyDefaults(alphaPro, parameters), {
      code: 'invalid_request',
      fieldErrors: [{ pointer: '/parameters/output_compression', code: 'not_allowed' }],
    });
  }
});
