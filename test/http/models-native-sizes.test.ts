import t, { type Test } from 'tap';
import { fileTestApp, type TestApp } from '../helpers/app.js';

type NativeSize = { width: number; height: number; result: 'native' | 'resized' | 'unavailable'; scale: number };
type Model = {
  id: string;
  pixel_sizes: Record<string, Record<string, { width: number; height: number }>>;
  native_sizes: Record<string, Record<string, NativeSize>>;
};

// No call reaches this address: the routes only read the backends' configuration.
const UNUSED_URL = 'http://127.0.0.1:9';

// The backends are configured when an app is built: one app per configuration, each built once for
// the tests that read it.
const GEMINI = { ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: 'k', GEMINI_BASE_URL: UNUSED_URL };
const OPENAI = {
  BETA_V5_PRO_BACKEND: 'openai',
  OPENAI_API_KEY: 'sk-test',
  OPENAI_BASE_URL: `${UNUSED_URL}/v1`,
  OPENAI_IMAGE_MODEL: 'gpt-image-1',
};
const local = fileTestApp();
const geminiPro = fileTestApp(GEMINI);
const geminiFlash = fileTestApp({ ...GEMINI, GEMINI_MODEL: 'gemini-2.5-flash-image' });
const openai = fileTestApp(OPENAI);
const openaiUpscale3 = fileTestApp({ ...OPENAI, MAX_UPSCALE: '3' });
const openaiExact = fileTestApp({ ...OPENAI, OPENAI_IMAGE_MODEL: 'gpt-image-2' });

async function models(t: Test, harness: TestApp) {
  const { auth } = await harness.newAccount(1000);
  const response = await harness.app.inject({ url: '/api/v1/models', headers: auth });
  t.equal(response.statusCode, 200);
  const byId = new Map((response.json().data as Model[]).map((model) => [model.id, model]));
  /** Whether an estimate (the create's checks, no charge) takes the cell. */
  const estimateStatus = async (model: string, aspectRatio: string, resolution: string) =>
    (
      await harness.app.inject({
        method: 'POST',
        url: '/api/v1/images/estimates',
        headers: auth,
        payload: { model, prompt: 'a harbour', parameters: { aspect_ratio: aspectRatio, resolution } },
      })
    ).statusCode;
  return { byId, estimateStatus, harness, auth };
}

/** Every size the model publishes has its native size, and only those. */
function assertEveryCell(t: Test, model: Model) {
  t.same(
    Object.fromEntries(Object.entries(model.native_sizes).map(([ratio, cells]) => [ratio, Object.keys(cells).sort()])),
    Object.fromEntries(Object.entries(model.pixel_sizes).map(([ratio, cells]) => [ratio, Object.keys(cells).sort()])),
    `${model.id}: one entry per published size`,
  );
}

t.test('local: every size generated natively, scale 1', async (t) => {
  const { byId } = await models(t, local());
  for (const model of byId.values()) {
    assertEveryCell(t, model);
    for (const [ratio, cells] of Object.entries(model.native_sizes))
      for (const [resolution, cell] of Object.entries(cells))
        t.same(
          cell,
          { ...model.pixel_sizes[ratio][resolution], result: 'native', scale: 1 },
          `${model.id} ${ratio} ${resolution}`,
        );
  }
});

t.test(
  'gemini: a model with imageSize makes every size; one without it is resized, or refused past MAX_UPSCALE',
  async (t) => {
    const pro = await models(t, geminiPro());
    const proAlpha = pro.byId.get('alpha-pro')!;
    assertEveryCell(t, proAlpha);
    t.ok(
      Object.values(proAlpha.native_sizes).every((cells) => Object.values(cells).every((c) => c.result === 'native')),
      'gemini-3-pro-image-preview: every size native',
    );

    const flash = await models(t, geminiFlash());
    const alpha = flash.byId.get('alpha-pro')!;
    assertEveryCell(t, alpha);
    t.same(alpha.native_sizes['1:1']['1K'], { width: 1024, height: 1024, result: 'native', scale: 1 });
    t.same(alpha.native_sizes['1:1']['2K'], { width: 1024, height: 1024, result: 'resized', scale: 2 });
    t.same(alpha.native_sizes['1:1']['4K'], { width: 1024, height: 1024, result: 'unavailable', scale: 4 });
    // Google's table for Gemini 2.5 Flash Image: 1536×672 at 21:9, 1344×768 at 16:9 (not the catalog's 1K row).
    t.same(alpha.native_sizes['21:9']['2K'], { width: 1536, height: 672, result: 'unavailable', scale: 2.063 });
    t.same(alpha.native_sizes['16:9']['1K'], { width: 1344, height: 768, result: 'resized', scale: 1.024 });
    t.same(alpha.native_sizes['16:9']['2K'], { width: 1344, height: 768, result: 'unavailable', scale: 2.048 });
    // beta-v5-pro stays on the local renderer.
    t.equal(flash.byId.get('beta-v5-pro')!.native_sizes['1:1']['2K'].result, 'native');

    for (const [ratio, cells] of Object.entries(alpha.native_sizes))
      for (const [resolution, cell] of Object.entries(cells))
        t.equal(
          await flash.estimateStatus('alpha-pro', ratio, resolution),
          cell.result === 'unavailable' ? 422 : 200,
          `${ratio} ${resolution} (${cell.result}): a create does as the catalog says`,
        );
  },
);

t.test('openai: the sizes the model accepts, resized to the catalog, refused past MAX_UPSCALE', async (t) => {
  const { byId, estimateStatus } = await models(t, openai());
  const beta = byId.get('beta-v5-pro')!;
  assertEveryCell(t, beta);
  t.same(beta.native_sizes['1:1']['1K'], { width: 1024, height: 1024, result: 'native', scale: 1 });
  t.same(beta.native_sizes['21:9']['1K'], { width: 1536, height: 1024, result: 'resized', scale: 1.031 });
  t.match(beta.native_sizes['21:9']['2K'], { width: 1536, height: 1024, result: 'unavailable' });
  t.ok(beta.native_sizes['21:9']['2K'].scale > 2);
  for (const [ratio, cells] of Object.entries(beta.native_sizes))
    for (const [resolution, cell] of Object.entries(cells))
      t.equal(
        await estimateStatus('beta-v5-pro', ratio, resolution),
        cell.result === 'unavailable' ? 422 : 200,
        `${ratio} ${resolution} (${cell.result}): a create does as the catalog says`,
      );

  const wider = await models(t, openaiUpscale3());
  t.equal(wider.byId.get('beta-v5-pro')!.native_sizes['21:9']['2K'].result, 'resized', 'MAX_UPSCALE 3 takes it');

  const exact = await models(t, openaiExact());
  t.same(exact.byId.get('beta-v5-pro')!.native_sizes['21:9']['2K'], {
    ...beta.pixel_sizes['21:9']['2K'],
    result: 'native',
    scale: 1,
  });
});

t.test('GET /api/v1/models/:model carries the same native sizes', async (t) => {
  const { byId, harness, auth } = await models(t, geminiFlash());
  const one = await harness.app.inject({ url: '/api/v1/models/alpha-pro', headers: auth });
  t.same(one.json().data.native_sizes, byId.get('alpha-pro')!.native_sizes);
});

t.test('gemini-2.5-flash-image: a 16:9 2K create is refused up front (422), nothing debited', async (t) => {
  const { harness, auth } = await models(t, geminiFlash());
  const before = (await harness.app.inject({ url: '/api/v1/account', headers: auth })).json().data.balance;
  const created = await harness.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: auth,
    payload: { model: 'alpha-pro', prompt: 'a harbour', parameters: { aspect_ratio: '16:9', resolution: '2K' } },
  });
  t.equal(created.statusCode, 422);
  t.equal(created.json().code, 'resolution_unavailable');
  t.equal((await harness.app.inject({ url: '/api/v1/account', headers: auth })).json().data.balance, before);
  const tasks = await harness.app.inject({ url: '/api/v1/images/generations', headers: auth });
  t.same(tasks.json().data, [], 'no task');
});
