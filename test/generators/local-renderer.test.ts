import sharp from 'sharp';
import t from 'tap';
import { LocalRenderer, referenceTileRects } from '../../src/generators/local-renderer.js';
import { GenerationError, type GenerationInput } from '../../src/generators/port.js';
import { imageGeneratorContract } from './generator-contract.js';

const notAborted = new AbortController().signal;

function input(overrides: Partial<GenerationInput> = {}): GenerationInput {
  return {
    model: 'alpha-pro',
    prompt: 'a red fox in fresh snow',
    aspectRatio: '1:1',
    resolution: '1K',
    width: 1024,
    height: 1024,
    references: [],
    ...overrides,
  };
}

async function renderOne(generationInput: GenerationInput): Promise<Buffer> {
  const [image] = await new LocalRenderer().generate(generationInput, notAborted);
  return image.bytes;
}

t.test('contract', async (t) => {
  imageGeneratorContract(t, () => new LocalRenderer());
});

t.test('the same input renders byte-identical PNGs', async (t) => {
  const first = await renderOne(input());
  const second = await renderOne(input());
  t.ok(first.equals(second));
});

t.test('different prompts render different PNGs', async (t) => {
  const fox = await renderOne(input({ prompt: 'a red fox in fresh snow' }));
  const owl = await renderOne(input({ prompt: 'an owl in an old oak' }));
  t.notOk(fox.equals(owl));
});

t.test(
  'the seed decides the scene: the same seed the same bytes, another seed (0 and the largest too) another picture',
  async (t) => {
    const seeds = [0, 1, 42, 4_294_967_295];
    const renders = await Promise.all(seeds.map((seed) => renderOne(input({ seed }))));
    t.ok((await renderOne(input({ seed: 42 }))).equals(renders[2]), 'seed 42 twice: byte for byte');
    const distinct = new Set(renders.map((bytes) => bytes.toString('base64')));
    t.equal(distinct.size, seeds.length, 'four seeds, four pictures');
    t.notOk((await renderOne(input())).equals(renders[0]), 'no seed is not seed 0');
  },
);

t.test('every reference appears as a tile in its own colour', async (t) => {
  const solid = (background: string) => sharp({ create: { width: 64, height: 64, channels: 3, background } });
  const references = [
    await solid('#ff0000').png().toBuffer(),
    await solid('#00ff00').jpeg().toBuffer(),
    await solid('#0000ff').webp().toBuffer(),
  ];
  const expected = [
    [255, 0, 0],
    [0, 255, 0],
    [0, 0, 255],
  ];
  const width = 1376;
  const height = 768;
  const bytes = await renderOne(input({ aspectRatio: '16:9', width, height, references }));
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });

  referenceTileRects(width, height, references.length).forEach((tile, i) => {
    for (const [dx, dy] of [
      [0.5, 0.5],
      [0.2, 0.2],
      [0.8, 0.8],
    ]) {
      const x = Math.floor(tile.left + tile.size * dx);
      const y = Math.floor(tile.top + tile.size * dy);
      const offset = (y * info.width + x) * info.channels;
      const pixel = [data[offset], data[offset + 1], data[offset + 2]];
      const distance = Math.max(...pixel.map((value, c) => Math.abs(value - expected[i][c])));
      t.ok(distance <= 24, `reference ${i + 1} at (${x}, ${y}) is ${pixel}, expected ${expected[i]}`);
    }
  });
});

t.test('renders exactly the requested size for catalog sizes', async (t) => {
  const sizes = [
    [1024, 1024],
    [848, 1264],
    [1584, 672],
    [2752, 1536],
    [3072, 5504],
  ];
  for (const [width, height] of sizes) {
    const [image] = await new LocalRenderer().generate(input({ width, height }), notAborted);
    const metadata = await sharp(image.bytes).metadata();
    const reported = [metadata.width, metadata.height, image.width, image.height];
    t.same(reported, [width, height, width, height], `${width}×${height}`);
  }
});

t.test('prompts with markup, control characters and long text still render', async (t) => {
  const prompt = `<svg onload="x"> & 'quotes' \u0000\u0007\ud800 tab\tnew\nline ${'très long '.repeat(40)}`;
  const bytes = await renderOne(input({ prompt }));
  t.equal((await sharp(bytes).metadata()).format, 'png');
});

t.test('an undecodable reference fails with a permanent reference_unreadable error', async (t) => {
  const error = await new LocalRenderer()
    .generate(input({ references: [Buffer.from('not an image')] }), notAborted)
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  t.ok(error instanceof GenerationError);
  t.match(error, { code: 'reference_unreadable', transient: false });
});
