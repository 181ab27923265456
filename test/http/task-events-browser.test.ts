import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import sharp from 'sharp';
import t from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp } from '../helpers/app.js';
import { CHROMIUM, launchChromium } from '../helpers/chromium.js';
import { freePort } from '../helpers/processes.js';
import { GatedGenerator, testWorker } from '../helpers/worker.js';

/**
 * A page such as a customer's site would serve: it is handed a task's stream_url (no key), opens
 * an EventSource on it, lists each status and shows the result image at the end.
 */
const PAGE = `<!doctype html>
<html><body style="margin:0;background:#fff;font:16px sans-serif">
<ol id="statuses"></ol>
<img id="result" style="display:block;width:256px;height:256px" alt="">
<script>
  const streamUrl = new URLSearchParams(location.search).get('stream');
  const source = new EventSource(streamUrl);
  source.addEventListener('task', (event) => {
    const task = JSON.parse(event.data);
    const item = document.createElement('li');
    item.textContent = task.status;
    document.getElementById('statuses').append(item);
    if (task.status === 'COMPLETED') document.getElementById('result').src = task.generated[0].url;
  });
  source.addEventListener('done', () => { source.close(); document.body.dataset.done = 'yes'; });
</script>
</body></html>`;

t.test(
  'a page on another origin follows a task with EventSource(stream_url) and shows the result image',
  { skip: !existsSync(CHROMIUM) && `no ${CHROMIUM}` },
  async (t) => {
    // The API's signed URLs name PUBLIC_BASE_URL: the server listens exactly there.
    const apiPort = await freePort();
    const apiOrigin = `http://127.0.0.1:${apiPort}`;
    const events = new TaskEvents();
    const harness = await buildTestApp(t, { PUBLIC_BASE_URL: apiOrigin }, { events });
    await harness.app.listen({ host: '127.0.0.1', port: apiPort });
    const { auth } = await harness.newAccount(1000);

    const site = createServer((_request, response) => response.setHeader('content-type', 'text/html').end(PAGE));
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => site.close(() => resolve())));
    const siteOrigin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;

    const created = await harness.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a red kite over the dunes' },
    });
    const task = created.json().data;

    const browser = await launchChromium(t);
    const page = await browser.newPage({ viewport: { width: 400, height: 400 } });
    // Only the two loopback servers are ever contacted (the test network rule).
    await page.route('**/*', (route) => {
      const url = route.request().url();
      return url.startsWith(apiOrigin) || url.startsWith(siteOrigin) ? route.continue() : route.abort();
    });
    await page.goto(`${siteOrigin}/?stream=${encodeURIComponent(task.stream_url)}`);
    await page.locator('#statuses li', { hasText: 'CREATED' }).waitFor();

    const gate = new GatedGenerator();
    testWorker(t, harness, { events, generator: gate }).start();
    await page.locator('#statuses li', { hasText: 'IN_PROGRESS' }).waitFor();
    gate.open();
    await page.locator('body[data-done=yes]').waitFor();
    await page.waitForFunction(() => {
      const image = document.getElementById('result') as HTMLImageElement;
      return image.complete && image.naturalWidth > 0;
    });
    t.same(await page.locator('#statuses li').allTextContents(), ['CREATED', 'IN_PROGRESS', 'COMPLETED']);

    const screenshot = join(process.env.SCREENSHOT_DIR ?? harness.dataDir, 'task-events-browser.png');
    await page.screenshot({ path: screenshot });
    t.ok(existsSync(screenshot), `screenshot at ${screenshot}`);
    // The image area of the screenshot holds the generated picture: its colours, not the white page.
    const box = (await page.locator('#result').boundingBox())!;
    const region = { left: Math.round(box.x), top: Math.round(box.y), width: 256, height: 256 };
    // stats() reads its input: each cut or resize is made into an image of its own first.
    const shown = await sharp(await sharp(screenshot).extract(region).removeAlpha().png().toBuffer()).stats();
    const finished = (
      await harness.app.inject({ url: `/api/v1/images/generations/${task.task_id}`, headers: auth })
    ).json().data.generated[0];
    const original = await (await fetch(finished.url)).arrayBuffer();
    const expected = await sharp(
      await sharp(Buffer.from(original)).resize(256, 256).removeAlpha().png().toBuffer(),
    ).stats();
    t.ok(
      shown.channels.some((channel) => channel.mean < 245),
      'the image area is not blank page',
    );
    for (const [index, channel] of expected.channels.entries())
      t.ok(
        Math.abs(channel.mean - shown.channels[index].mean) < 12,
        `channel ${index}: mean ${shown.channels[index].mean.toFixed(1)} on screen, ${channel.mean.toFixed(1)} in the image`,
      );
  },
);
