// Not in the PostgreSQL pass: the page in a browser; the API calls it makes are the HTTP suites' own, run on PostgreSQL in this pass.
import { existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { fileTestApp } from '../helpers/app.js';
import { CHROMIUM, SCREENSHOT_DIR } from '../helpers/chromium.js';
import { browserOfFile } from '../helpers/file-browser.js';
import { encodedImage } from '../helpers/images.js';

// Both tests at once, in tabs of one Chromium: most of their time is the page loading and answering.
t.jobs = 2;

/** The file's app, listening on a loopback port; each test has an account and a tab of its own. */
const fileApp = fileTestApp();
t.before(() => fileApp().app.listen({ host: '127.0.0.1', port: 0 }));

/** Swagger UI as a person uses it: loaded from the running server in a headless Chromium. */
async function swaggerUi(t: Test) {
  const harness = fileApp();
  const { port } = harness.app.server.address() as AddressInfo;
  const { key } = await harness.newAccount(1000);
  const context = await (await browserOfFile()).newContext({ viewport: { width: 1280, height: 2000 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  // Only this server is ever contacted (the test network rule; Swagger UI's validator badge is off).
  const origin = `http://127.0.0.1:${port}`;
  await page.route('**/*', (route) => (route.request().url().startsWith(origin) ? route.continue() : route.abort()));
  await page.goto(`${origin}/docs`);
  await page.locator('.swagger-ui .info .title').waitFor();
  // Kept after the run, beside the Playground's, to be looked at.
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  return { page, key, screenshotDir: SCREENSHOT_DIR };
}

async function authorize(page: Page, key: string): Promise<void> {
  await page.locator('.scheme-container .btn.authorize').click();
  // The account key's scheme; the admin API's (adminAuth) has a form of its own in the same dialog.
  const accountKeyForm = page.locator('.modal-ux form').filter({ hasText: 'bearerAuth' });
  await accountKeyForm.locator('input[type=text], input[type=password]').first().fill(key);
  await accountKeyForm.locator('.auth-btn-wrapper .btn.authorize').click();
  await page.locator('.modal-ux .btn-done, .modal-ux .close-modal').first().click();
}

/** Opens an operation, presses "Try it out", lets `prepare` fill it in, and presses "Execute". */
async function tryItOut(
  page: Page,
  operation: string,
  prepare: (block: ReturnType<Page['locator']>) => Promise<void> = async () => {},
) {
  const block = page.locator(`#operations-${operation}`);
  await block.locator('.opblock-summary').first().click();
  await block.locator('.try-out__btn').click();
  await prepare(block);
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() !== 'OPTIONS' && r.url().includes('/api/v1/')),
    block.locator('.execute').click(),
  ]);
  await block.locator('.live-responses-table tr.response .response-col_status').first().waitFor();
  return {
    response,
    shownStatus: (
      await block.locator('.live-responses-table tr.response .response-col_status').first().textContent()
    )?.trim(),
  };
}

t.test(
  'Swagger UI: after Authorize, "Try it out" on create with the pre-filled example gets a 202',
  { skip: !existsSync(CHROMIUM) && `no ${CHROMIUM}` },
  async (t) => {
    const { page, key, screenshotDir } = await swaggerUi(t);
    await authorize(page, key);
    const { response, shownStatus } = await tryItOut(page, 'generations-createGeneration');
    t.equal(response.status(), 202, 'the example as pre-filled is accepted');
    t.equal(shownStatus, '202', 'Swagger UI shows the 202');
    const task = (await response.json()).data;
    t.equal(task.status, 'CREATED');
    t.equal(task.model, 'alpha-pro', 'the first example is the alpha-pro text-to-image one');
    t.equal(task.cost, 25, 'and charged');
    const screenshot = join(screenshotDir, 'swagger-create.png');
    await page.screenshot({ path: screenshot, fullPage: false });
    t.ok(existsSync(screenshot), `screenshot at ${screenshot}`);
  },
);

t.test(
  'Swagger UI: "Try it out" on upload with a file gets a 201',
  { skip: !existsSync(CHROMIUM) && `no ${CHROMIUM}` },
  async (t) => {
    const { page, key, screenshotDir } = await swaggerUi(t);
    await authorize(page, key);
    const png = await encodedImage('png', 64, 48);
    const { response, shownStatus } = await tryItOut(page, 'media-uploadMedia', async (block) => {
      await block
        .locator('input[type=file]')
        .setInputFiles({ name: 'reference.png', mimeType: 'image/png', buffer: png });
    });
    t.equal(response.status(), 201, 'the upload is stored');
    t.equal(shownStatus, '201', 'Swagger UI shows the 201');
    t.equal((await response.json()).data.content_type, 'image/png');
    const screenshot = join(screenshotDir, 'swagger-upload.png');
    await page.screenshot({ path: screenshot, fullPage: false });
    t.ok(existsSync(screenshot), `screenshot at ${screenshot}`);
  },
);
