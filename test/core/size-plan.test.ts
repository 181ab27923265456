import t from 'tap';
import { MODEL_CATALOG } from '../../schemas/catalog.js';
import {
  geminiImageConfig,
  nearestAcceptedSize,
  nativeSize,
  openAiModelFamily,
  openAiSizeRule,
  parseOpenAiImageSizes,
  plannedSize,
  upscaleFactor,
} from '../../src/core/size-plan.js';
import { geminiImageConfigRefusal, openAiSizeRefusal } from '../helpers/provider-rules.js';

/** Every (catalog model, aspect ratio, resolution) cell with its exact size. */
const CELLS = MODEL_CATALOG.flatMap((model) =>
  Object.entries(model.pixelSizes).flatMap(([ratio, byResolution]) =>
    Object.entries(byResolution).map(([resolution, size]) => ({ model: model.id, ratio, resolution, size })),
  ),
);
const OPENAI_MODELS = ['gpt-image-1', 'gpt-image-1-mini', 'gpt-image-1.5', 'gpt-image-2', 'dall-e-3', 'dall-e-2'];
const GEMINI_MODELS = [
  'gemini-3-pro-image-preview',
  'gemini-3.1-flash-image-preview',
  'gemini-2.5-flash-image',
  'gemini-3.1-flash-lite-image',
];
const wxh = (s: { width: number; height: number }) => `${s.width}x${s.height}`;
const size = (width: number, height: number) => ({ width, height });

t.test('every catalog cell on every built-in OpenAI model asks for a size the provider accepts', async (t) => {
  t.ok(CELLS.length >= 40, `${CELLS.length} cells`);
  for (const model of OPENAI_MODELS) {
    const rule = openAiSizeRule(model);
    for (const cell of CELLS) {
      const planned = plannedSize(cell.size, rule);
      t.equal(openAiSizeRefusal(model, wxh(planned)), null, `${model} ${cell.model} ${cell.ratio} ${cell.resolution}`);
    }
  }
  // The sizes as sent before decision 0011: the provider refuses most of them, so the fake's rules bite.
  const acceptedAsBefore = CELLS.filter((cell) => openAiSizeRefusal('gpt-image-1', wxh(cell.size)) === null);
  t.same(new Set(acceptedAsBefore.map((cell) => `${cell.ratio} ${cell.resolution}`)), new Set(['1:1 1K']));
});

t.test('every catalog cell on every known Gemini model sends an imageConfig the provider accepts', async (t) => {
  for (const model of GEMINI_MODELS) {
    for (const cell of CELLS) {
      const config = geminiImageConfig(model, cell.ratio, cell.resolution);
      t.equal(geminiImageConfigRefusal(model, config), null, `${model} ${cell.model} ${cell.ratio} ${cell.resolution}`);
      t.equal(config.aspectRatio, cell.ratio);
    }
  }
  t.same(geminiImageConfig('gemini-3-pro-image-preview', '21:9', '4K'), { aspectRatio: '21:9', imageSize: '4K' });
  t.same(geminiImageConfig('gemini-3.1-flash-image-preview', '16:9', '2K'), { aspectRatio: '16:9', imageSize: '2K' });
  t.same(geminiImageConfig('gemini-2.5-flash-image', '16:9', '2K'), { aspectRatio: '16:9' }, 'aspectRatio only');
  t.same(
    geminiImageConfig('gemini-next-image', '1:1', '1K'),
    { aspectRatio: '1:1' },
    'an unknown name: aspectRatio only',
  );
  t.not(geminiImageConfigRefusal('gemini-2.5-flash-image', { aspectRatio: '1:1', imageSize: '1K' }), null);
});

t.test(
  'a fixed list: the nearest aspect ratio, then the largest with no more pixels than the target, else the largest',
  async (t) => {
    const gpt = [size(1024, 1024), size(1536, 1024), size(1024, 1536)];
    t.same(nearestAcceptedSize(size(1264, 848), gpt), size(1536, 1024), '3:2 → landscape');
    t.same(nearestAcceptedSize(size(3168, 1344), gpt), size(1536, 1024), '21:9 → landscape');
    t.same(nearestAcceptedSize(size(928, 1152), gpt), size(1024, 1536), '4:5 is nearer 2:3 than 1:1');
    t.same(nearestAcceptedSize(size(1152, 928), gpt), size(1536, 1024), '5:4 is nearer 3:2 than 1:1');
    t.same(nearestAcceptedSize(size(4096, 4096), gpt), size(1024, 1024));
    const dallE2 = [size(256, 256), size(512, 512), size(1024, 1024)];
    t.same(nearestAcceptedSize(size(1024, 1024), dallE2), size(1024, 1024), 'the largest within the target');
    t.same(nearestAcceptedSize(size(600, 600), dallE2), size(512, 512), 'not larger than the target');
    t.same(nearestAcceptedSize(size(200, 200), dallE2), size(1024, 1024), 'all larger: the largest');
    t.same(nearestAcceptedSize(size(5504, 3072), dallE2), size(1024, 1024));
    t.same(nearestAcceptedSize(size(1264, 848), dallE2), size(1024, 1024), 'no more pixels, though taller');
    const dallE3 = [size(1024, 1024), size(1792, 1024), size(1024, 1792)];
    t.same(nearestAcceptedSize(size(1376, 768), dallE3), size(1792, 1024));
    t.same(nearestAcceptedSize(size(768, 1376), dallE3), size(1024, 1792));
  },
);

t.test('gpt-image-2: the catalog size itself when it fits, else scaled into the limits', async (t) => {
  const rule = openAiSizeRule('gpt-image-2');
  t.same(plannedSize(size(1376, 768), rule), size(1376, 768));
  t.same(plannedSize(size(3168, 1344), rule), size(3168, 1344), '2K 21:9 is native');
  t.same(plannedSize(size(4096, 4096), rule), size(2880, 2880), 'at most 3840×2160 pixels');
  t.same(plannedSize(size(6336, 2688), rule), size(3840, 1616), 'at most 3840 per edge, multiples of 16');
  t.same(plannedSize(size(1000, 1000), rule), size(992, 992), 'rounded down to multiples of 16');
  t.same(plannedSize(size(512, 512), rule), size(816, 816), 'raised to the pixel minimum');
  t.same(plannedSize(size(4000, 1000), rule), size(2992, 992), 'the long edge shortened to 3 × the short one');
  t.same(openAiSizeRule('gpt-image-2-2026-04-21'), rule, 'dated snapshots follow the family');
});

t.test('OPENAI_IMAGE_SIZES overrides the model name; unknown names send the exact size', async (t) => {
  t.same(openAiSizeRule('flux-pro'), { kind: 'exact' });
  t.same(plannedSize(size(5504, 3072), openAiSizeRule('flux-pro')), size(5504, 3072));
  t.same(openAiSizeRule('gpt-image-1', 'exact'), { kind: 'exact' });
  t.same(openAiSizeRule('flux-pro', ' 1024x1024, 1344x768 ,768x1344'), {
    kind: 'sizes',
    sizes: [size(1024, 1024), size(1344, 768), size(768, 1344)],
  });
  t.same(plannedSize(size(1376, 768), openAiSizeRule('flux-pro', '1024x1024,1344x768,768x1344')), size(1344, 768));
  for (const bad of ['', 'auto', '1024', '1024x', '0x1024', '1024x1024,', '1024*1024', 'exact,1024x1024']) {
    t.throws(() => parseOpenAiImageSizes(bad), /^expected exact or comma-separated WIDTHxHEIGHT sizes/, bad);
  }
});

t.test('the OpenAI model family: by name (a router prefix aside), or as configured', async (t) => {
  t.equal(openAiModelFamily('gpt-image-1'), 'gpt-image');
  t.equal(openAiModelFamily('chatgpt-image-latest'), 'gpt-image');
  t.equal(openAiModelFamily('openai/gpt-image-1'), 'gpt-image');
  t.equal(openAiModelFamily('dall-e-3'), 'dall-e');
  t.equal(openAiModelFamily('flux-pro'), 'other');
  t.equal(openAiModelFamily('prod-images', 'gpt-image'), 'gpt-image');
  t.same(openAiSizeRule('openai/gpt-image-1'), openAiSizeRule('gpt-image-1'));
  t.same(openAiSizeRule('prod-images', undefined, 'gpt-image'), openAiSizeRule('gpt-image-1'));
  t.same(openAiSizeRule('prod-images'), { kind: 'exact' });
});

t.test('what a backend makes natively, and the enlargement a cell would need', async (t) => {
  const cell = (aspectRatio: string, resolution: string, width: number, height: number) => ({
    aspectRatio,
    resolution,
    width,
    height,
  });
  const wide2K = cell('21:9', '2K', 3168, 1344);
  t.same(nativeSize({ backend: 'local' }, wide2K), size(3168, 1344));
  t.same(nativeSize({ backend: 'gemini', model: 'gemini-3-pro-image-preview' }, wide2K), size(3168, 1344));
  t.same(
    nativeSize({ backend: 'gemini', model: 'gemini-2.5-flash-image' }, wide2K),
    size(1536, 672),
    'its one 21:9 size, as Google documents it',
  );
  t.same(nativeSize({ backend: 'openai', rule: openAiSizeRule('gpt-image-1') }, wide2K), size(1536, 1024));
  t.same(nativeSize({ backend: 'openai', rule: openAiSizeRule('flux-pro') }, wide2K), size(3168, 1344));
  t.equal(upscaleFactor(size(1536, 1024), size(3168, 1344)), 3168 / 1536);
  t.equal(upscaleFactor(size(1584, 672), size(3168, 1344)), 2);
  t.ok(upscaleFactor(size(4096, 4096), size(1024, 1024)) < 1, 'a reduction');
});

t.test("Gemini 2.5 Flash Image's sizes are Google's table for it, not Gemini 3 Pro's 1K row", async (t) => {
  // ai.google.dev/gemini-api/docs/image-generation, "Aspect ratios" (Gemini 2.5 Flash Image).
  const documented: [string, number, number][] = [
    ['1:1', 1024, 1024],
    ['2:3', 832, 1248],
    ['3:2', 1248, 832],
    ['3:4', 864, 1184],
    ['4:3', 1184, 864],
    ['4:5', 896, 1152],
    ['5:4', 1152, 896],
    ['9:16', 768, 1344],
    ['16:9', 1344, 768],
    ['21:9', 1536, 672],
  ];
  const flash = { backend: 'gemini', model: 'gemini-2.5-flash-image' } as const;
  for (const [aspectRatio, width, height] of documented) {
    const cell = { aspectRatio, resolution: '1K', width: 1, height: 1 };
    t.same(nativeSize(flash, cell), size(width, height), aspectRatio);
  }
  const wide2K = { aspectRatio: '16:9', resolution: '2K', width: 2752, height: 1536 };
  const factor = upscaleFactor(nativeSize(flash, wide2K), wide2K);
  t.ok(factor > 2, `16:9 2K needs ${factor.toFixed(3)}x of 1344×768: past the default MAX_UPSCALE`);
  t.same(
    nativeSize({ backend: 'gemini', model: 'some-future-image-model' }, wide2K),
    size(1376, 768),
    'a model the plan does not know: the 1K row of the catalog, as before',
  );
});
