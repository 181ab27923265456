// Not in the PostgreSQL pass: the page in a browser; the API calls it makes are the HTTP suites' own, run on PostgreSQL in this pass.
import { existsSync } from 'node:fs';
import t from 'tap';
import { MODEL_CATALOG } from '../../schemas/catalog.js';
import { S3BlobStore } from '../../src/blobs/s3-blob-store.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from '../../src/generators/port.js';
import { LocalRenderer } from '../../src/generators/local-renderer.js';
import { CHROMIUM } from '../helpers/chromium.js';
import { encodedImage } from '../helpers/images.js';
import {
  assertCleanPage,
  canvasPixels,
  openPlayground,
  tableCells,
  type PlaygroundSession,
  contrastFailures,
  unlabelledControls,
} from '../helpers/playground.js';
import { startTestS3, testS3Client } from '../helpers/s3.js';
import { testWorker } from '../helpers/worker.js';

const skip = !existsSync(CHROMIUM) && `no ${CHROMIUM}`;

/** The local renderer, each generation held until the test releases one: status changes can be watched. */
class HeldGenerator implements ImageGenerator {
  readonly name = 'held';
  private credits = 0;
  private readonly waiting: (() => void)[] = [];

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.credits++;
  }

  async generate(input: GenerationInput, signal: AbortSignal): Promise<GeneratedImage[]> {
    if (this.credits > 0) this.credits--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    return new LocalRenderer().generate(input, signal);
  }
}

/** The form filled in, the price awaited; Generate pressed. */
async function generateFromForm(
  session: PlaygroundSession,
  choice: { model: string; prompt: string; aspectRatio?: string; resolution?: string },
) {
  const { page } = session;
  await page.getByLabel('Model', { exact: true }).selectOption(choice.model);
  await page.getByLabel('Prompt').fill(choice.prompt);
  if (choice.aspectRatio) await page.getByLabel('Aspect ratio').selectOption(choice.aspectRatio);
  if (choice.resolution) await page.getByLabel('Resolution').selectOption(choice.resolution);
  await page.locator('#price[data-state=ok]').waitFor();
}

t.test('the page: its security headers, key entry kept in sessionStorage only, a refused key', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page, pageHeaders, origin } = session;
  const csp = pageHeaders['content-security-policy'];
  t.match(csp, /default-src 'self'/);
  t.match(csp, new RegExp(`img-src 'self' blob: ${origin.replace(/[.]/g, '\\.')}`), 'images: self and the result URLs');
  t.match(csp, /frame-ancestors 'none'/);
  t.equal(pageHeaders['x-frame-options'], 'DENY');

  await page.getByRole('textbox', { name: /^API key/ }).fill('igk_not-a-real-key');
  await page.getByRole('button', { name: 'Use key' }).click();
  await page.locator('#key-state', { hasText: 'refused' }).waitFor();
  t.match(await page.locator('#key-state').textContent(), /401 unauthorized/);
  t.ok(await page.locator('#workspace').isHidden(), 'no form without a valid key');

  const { key } = await session.newAccount(1000);
  await session.enterKey(key);
  t.equal(await page.evaluate(() => document.cookie), '', 'no cookie');
  t.equal(await page.evaluate(() => Object.values(sessionStorage).filter((v) => v.startsWith('igk_')).length), 1);
  t.equal(await page.evaluate(() => localStorage.length), 0, 'nothing in localStorage');
  t.notMatch(page.url(), key, 'never in the URL');
  await page.reload();
  await page.locator('body[data-ready=yes]').waitFor();
  t.pass('a reload in the same tab keeps the key');
  await session.screenshot('playground-1-key');
  await page.getByRole('button', { name: 'Forget key' }).click();
  t.equal(await page.evaluate(() => sessionStorage.length), 0, 'Forget key empties the storage');
  t.ok(await page.locator('#workspace').isHidden(), 'and hides the form');
  assertCleanPage(t, session, [401]);
});

t.test(
  'text-to-image on each model from the form: live status, then the image at the catalog pixel size',
  { skip },
  async (t) => {
    const session = await openPlayground(t);
    const { page } = session;
    const { key } = await session.newAccount(1000);
    await session.enterKey(key);
    const held = new HeldGenerator();
    testWorker(t, session, { events: session.events, generator: held }).start();

    await page.getByLabel('Prompt').fill('🦊🦊');
    await page.locator('#price[data-state=bad]').waitFor();
    t.match(
      await page.locator('#prompt-count').textContent(),
      /^2 \/ \d+ code points \(at least 3\)$/,
      'code points, not UTF-16 units',
    );
    t.match(
      await page.locator('#price').textContent(),
      /once the prompt has 3 to/,
      'no price for a prompt out of bounds',
    );

    const choices = { 'alpha-pro': '16:9', 'beta-v5-pro': '3:4' } as Record<string, string>;
    for (const model of MODEL_CATALOG) {
      const aspectRatio = choices[model.id];
      await page.getByLabel('Model', { exact: true }).selectOption(model.id);
      const offered = await page
        .locator('#aspect-ratio option')
        .evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
      t.same(offered, model.aspectRatios, `${model.id}: the aspect ratios it offers`);
      const resolutions = await page
        .locator('#resolution option')
        .evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
      t.same(resolutions, model.resolutions, `${model.id}: the resolutions it offers`);
      t.equal(await page.getByLabel('Prompt').getAttribute('maxlength'), String(model.promptLength.max));

      await generateFromForm(session, { model: model.id, prompt: `a lighthouse at dusk, ${model.id}`, aspectRatio });
      const [width, height] = [
        model.pixelSizes[aspectRatio as '1:1']['1K']!.width,
        model.pixelSizes[aspectRatio as '1:1']['1K']!.height,
      ];
      t.equal(
        await page.locator('#price').textContent(),
        `Price: ${model.prices['1K']} tokens for ${width} × ${height} px`,
        `${model.id}: the price before Generate`,
      );
      t.match(await page.locator('#prompt-count').textContent(), `/ ${model.promptLength.max} code points`);
      await session.screenshot(`playground-2-form-${model.id}`);

      await page.getByRole('button', { name: 'Generate' }).click();
      await page.locator('#task-events li', { hasText: 'IN_PROGRESS' }).waitFor();
      t.equal(await page.locator('#result img').count(), 0, `${model.id}: no image while it runs`);
      await session.screenshot(`playground-3-running-${model.id}`);
      held.release();
      await page.locator('#task-events li', { hasText: 'COMPLETED' }).waitFor();
      await page.waitForFunction(() => {
        const image = document.querySelector('#result img.generated') as HTMLImageElement | null;
        return image?.complete && image.naturalWidth > 0;
      });
      const shown = await page.locator('#result img.generated').evaluate((image: HTMLImageElement) => ({
        naturalWidth: image.naturalWidth,
        naturalHeight: image.naturalHeight,
        ratio: image.getBoundingClientRect().width / image.getBoundingClientRect().height,
      }));
      t.same(
        [shown.naturalWidth, shown.naturalHeight],
        [width, height],
        `${model.id}: the image is ${width} × ${height}`,
      );
      t.ok(Math.abs(shown.ratio - width / height) < 0.01, `${model.id}: shown at its aspect ratio`);
      const statuses = await page.locator('#task-events li').allTextContents();
      t.equal(statuses.at(-1), 'COMPLETED');
      t.ok(statuses.includes('IN_PROGRESS'), `${model.id}: states seen live: ${statuses}`);
      t.match(await page.locator('#result figcaption').textContent(), `${width} × ${height} px`);
      t.ok(await page.getByRole('link', { name: 'Download' }).getAttribute('href'));
      await session.screenshot(`playground-3-result-${model.id}`);
    }
    assertCleanPage(t, session);
  },
);

t.test('a refusal shows the problem code and detail: 402 insufficient_tokens', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key } = await session.newAccount(10);
  await session.enterKey(key);
  await generateFromForm(session, { model: 'alpha-pro', prompt: 'a red kite over the dunes' });
  await page.getByRole('button', { name: 'Generate' }).click();
  const problem = page.getByRole('alert');
  await problem.locator('.problem-code').waitFor();
  t.equal(await problem.locator('.problem-code').textContent(), 'insufficient_tokens');
  t.match(await problem.textContent(), /^402 /);
  t.match(await problem.locator('.problem-detail').textContent(), /token/i, 'the detail');
  t.equal(await page.locator('#balance').textContent(), '10', 'nothing charged');
  await session.screenshot('playground-4-refused');
  assertCleanPage(t, session, [402]);
});

t.test('cancel while the task waits: the stream shows CANCELED, the cost comes back', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key } = await session.newAccount(100);
  await session.enterKey(key);
  // No worker runs: the task stays CREATED until it is canceled.
  await generateFromForm(session, { model: 'beta-v5-pro', prompt: 'a slow painting of a snail' });
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.locator('#task-events li', { hasText: 'CREATED' }).waitFor();
  await page.locator('#balance', { hasText: '75' }).waitFor();
  await page.getByRole('button', { name: 'Cancel task' }).click();
  await page.locator('#task-events li', { hasText: 'CANCELED' }).waitFor();
  await page.locator('#balance', { hasText: '100' }).waitFor();
  t.ok(await page.getByRole('button', { name: 'Cancel task' }).isHidden(), 'no cancel once it ended');
  t.same(
    await page.locator('#ledger tbody td:nth-child(2)').allTextContents(),
    ['refund', 'debit', 'grant'],
    'the ledger: refund, debit, grant',
  );
  await session.screenshot('playground-5-canceled');
  assertCleanPage(t, session);
});

t.test('image-to-image with two uploaded references', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key, auth } = await session.newAccount(1000);
  await session.enterKey(key);
  testWorker(t, session, { events: session.events }).start();
  await page.getByLabel('Model', { exact: true }).selectOption('alpha-pro');
  await page.locator('#reference-files').setInputFiles([
    { name: 'one.png', mimeType: 'image/png', buffer: await encodedImage('png', 64, 48) },
    { name: 'two.webp', mimeType: 'image/webp', buffer: await encodedImage('webp', 40, 40) },
  ]);
  await page.locator('#reference-list li').nth(1).waitFor();
  const mediaIds = await page.locator('#reference-list .media-id').allTextContents();
  t.equal(mediaIds.length, 2, 'two thumbnails with their media_id');
  await page.waitForFunction(() =>
    [...document.querySelectorAll<HTMLImageElement>('#reference-list img')].every((i) => i.naturalWidth > 0),
  );
  await generateFromForm(session, { model: 'alpha-pro', prompt: 'the two of them, together' });
  await session.screenshot('playground-6-references');
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.locator('#task-events li', { hasText: 'COMPLETED' }).waitFor();
  await page.locator('#result img.generated').waitFor();
  const list = await session.app.inject({ url: '/api/v1/images/generations', headers: auth });
  t.same(list.json().data[0].image_reference, mediaIds, 'the task names both references');
  await session.screenshot('playground-7-image-to-image');
  assertCleanPage(t, session);
});

t.test('history: a grid of the account tasks, paged by cursor, filtered by status', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key, auth } = await session.newAccount(10_000);
  // 14 tasks, the 3 oldest canceled: one page of 12 and a second of 2.
  const ids: string[] = [];
  for (let i = 0; i < 14; i++) {
    const created = await session.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'beta-v5-pro', prompt: `history task ${i}` },
    });
    ids.push(created.json().data.task_id);
  }
  for (const id of ids.slice(0, 3))
    await session.app.inject({ method: 'POST', url: `/api/v1/images/generations/${id}/cancel`, headers: auth });
  await session.enterKey(key);
  const items = page.locator('#history li');
  await items.nth(11).waitFor();
  t.equal(await items.count(), 12, 'the first page');
  t.equal(await items.first().getAttribute('data-task-id'), ids[13], 'newest first');
  await page.getByRole('button', { name: 'Older tasks' }).click();
  await items.nth(13).waitFor();
  t.same(
    await items.evaluateAll((nodes) => nodes.map((n) => (n as HTMLElement).dataset.taskId)),
    [...ids].reverse(),
    'both pages, each task once',
  );
  t.ok(await page.getByRole('button', { name: 'Older tasks' }).isHidden(), 'no more pages');
  await page.getByLabel('Status', { exact: true }).selectOption('CANCELED');
  await page.waitForFunction(() => document.querySelectorAll('#history li').length === 3);
  t.same(await items.evaluateAll((nodes) => nodes.map((n) => (n as HTMLElement).dataset.status)), [
    'CANCELED',
    'CANCELED',
    'CANCELED',
  ]);
  t.equal(await page.locator('#balance').textContent(), String(10_000 - 11 * 25), 'the balance');
  t.equal(await page.locator('#ledger tbody tr').count(), 10, 'the last 10 ledger entries');
  await session.screenshot('playground-8-history');
  assertCleanPage(t, session);
});

t.test('on a phone-sized screen: nothing wider than the screen, every control labelled', { skip }, async (t) => {
  const session = await openPlayground(t, { viewport: { width: 390, height: 844 } });
  const { page } = session;
  const { key } = await session.newAccount(1000);
  await session.enterKey(key);
  testWorker(t, session, { events: session.events }).start();
  await generateFromForm(session, { model: 'alpha-pro', prompt: 'a tall tree', aspectRatio: '9:16' });
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.locator('#result img.generated').waitFor();
  await page.waitForFunction(() => (document.querySelector('#result img.generated') as HTMLImageElement).complete);
  t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scrolling');
  const box = (await page.locator('#result img.generated').boundingBox())!;
  t.ok(box.width <= 390, `the image fits: ${Math.round(box.width)} px wide`);
  t.same(await unlabelledControls(page), [], 'every control has a label or a name');
  const contrast = await contrastFailures(page);
  t.ok(contrast.checked > 30, `${contrast.checked} pieces of text checked`);
  t.same(contrast.failures, [], 'text contrast at least 4.5:1 (3:1 for large text)');
  // The keyboard reaches the form: the key field, its buttons, then the model select.
  await page.locator('#api-key').focus();
  const order: string[] = [];
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press('Tab');
    order.push(await page.evaluate(() => document.activeElement?.id ?? ''));
  }
  t.ok(order.includes('model') && order.includes('prompt'), `Tab reaches the model and the prompt: ${order}`);
  await session.screenshot('playground-9-phone');
  assertCleanPage(t, session);
});

t.test('with S3 presigned downloads the result is shown from the bucket, within the CSP', { skip }, async (t) => {
  const s3 = await startTestS3(t);
  const client = testS3Client(t, s3);
  const session = await openPlayground(t, {
    env: { ...s3.env, S3_PRESIGNED_DOWNLOADS: 'true' },
    testApp: {
      blobAdapter: {
        kind: 's3',
        open: async () => ({
          blobs: new S3BlobStore({ client, bucket: s3.bucket }),
          env: s3.env,
          storedKeys: async () => [],
        }),
      },
    },
    alsoAllowed: [new URL(s3.endpoint).origin],
  });
  t.match(session.pageHeaders['content-security-policy'], new URL(s3.endpoint).origin, 'the bucket may serve images');
  const { page } = session;
  const { key } = await session.newAccount(1000);
  await session.enterKey(key);
  testWorker(t, session, { events: session.events }).start();
  await generateFromForm(session, { model: 'beta-v5-pro', prompt: 'a bucket of paint', aspectRatio: '4:3' });
  await page.getByRole('button', { name: 'Generate' }).click();
  const [redirected] = await Promise.all([
    page.waitForResponse((response) => response.url().startsWith(new URL(s3.endpoint).origin)),
    page.locator('#task-events li', { hasText: 'COMPLETED' }).waitFor(),
  ]);
  t.equal(redirected.status(), 200, 'the image came from S3');
  await page.waitForFunction(() => {
    const image = document.querySelector('#result img.generated') as HTMLImageElement | null;
    return image?.complete && image.naturalWidth === 1200 && image.naturalHeight === 896;
  });
  await session.screenshot('playground-10-s3-presigned');
  assertCleanPage(t, session);
});

t.test('the output format: offered from the catalog, the result shown and stored as WebP', { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key } = await session.newAccount(1000);
  await session.enterKey(key);
  testWorker(t, session, { events: session.events }).start();

  const offered = await page
    .locator('#output-format option')
    .evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
  t.same(offered, ['png', 'jpeg', 'webp'], 'the formats of the catalog, png first');
  t.equal(await page.getByLabel('Output format').inputValue(), 'png', 'png unless chosen');
  await generateFromForm(session, { model: 'alpha-pro', prompt: 'a lighthouse as webp', aspectRatio: '3:2' });
  await page.getByLabel('Output format').selectOption('webp');
  await page.locator('#price[data-state=ok]').waitFor();
  t.equal(await page.locator('#price').textContent(), 'Price: 25 tokens for 1264 × 848 px', 'the same price');
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.locator('#task-events li', { hasText: 'COMPLETED' }).waitFor();
  await page.waitForFunction(() => {
    const image = document.querySelector('#result img.generated') as HTMLImageElement | null;
    return image?.complete && image.naturalWidth > 0;
  });
  const shown = await page
    .locator('#result img.generated')
    .evaluate((image: HTMLImageElement) => [image.naturalWidth, image.naturalHeight]);
  t.same(shown, [1264, 848], 'the WebP decodes in the page at the catalog size');
  t.match(await page.locator('#result figcaption').textContent(), 'image/webp');
  await session.screenshot('playground-11-webp');
  assertCleanPage(t, session);
});

t.test("the usage view: the account's 30 days as a chart and totals, and its keys", { skip }, async (t) => {
  const session = await openPlayground(t);
  const { page } = session;
  const { key, auth } = await session.newAccount(1000);
  // No worker: each task stays CREATED (charged at creation) until the one canceled is refunded.
  const ids: string[] = [];
  for (const model of ['alpha-pro', 'alpha-pro', 'beta-v5-pro']) {
    const created = await session.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model, prompt: `usage of ${model}` },
    });
    ids.push(created.json().data.task_id);
  }
  await session.app.inject({ method: 'POST', url: `/api/v1/images/generations/${ids[0]}/cancel`, headers: auth });
  await session.enterKey(key);
  await page.locator('#usage-totals tfoot tr').waitFor();
  // Model, tasks, images, tokens charged, tokens refunded, failed, canceled.
  t.same(await tableCells(page, '#usage-totals tbody tr'), [
    ['alpha-pro', '2', '0', '50', '25', '0', '1'],
    ['beta-v5-pro', '1', '0', '25', '0', '0', '0'],
  ]);
  t.same(await tableCells(page, '#usage-totals tfoot tr'), [['All models', '3', '0', '75', '25', '0', '1']]);
  const perDay = await tableCells(page, '#usage-chart table.chart-data tbody tr');
  t.equal(perDay.length, 30, 'a row a day for 30 days');
  t.same(perDay.at(-1)!.slice(1), ['50', '25'], "today's tokens charged, per model");
  t.ok(
    perDay.slice(0, -1).every((row) => row.slice(1).every((cell) => cell === '0')),
    'days without tasks are zero',
  );
  t.match(await page.locator('#usage-chart figcaption').textContent(), 'Tokens charged per day and model · 75');
  const pixels = await canvasPixels(page, '#usage-chart canvas', [0x00, 0x72, 0xb2]);
  t.ok(pixels.ofColour > 20, `alpha-pro's bar is drawn (${pixels.ofColour} pixels of its colour)`);
  const keys = await tableCells(page, '#keys tbody tr');
  t.equal(keys.length, 1, 'the key in use');
  t.equal(keys[0][1], key.slice(0, 12), 'its prefix, never the key');
  t.equal(keys[0][2], 'every model');
  await page.locator('#usage-section').scrollIntoViewIfNeeded();
  await session.screenshot('playground-12-usage');
  assertCleanPage(t, session);
});
