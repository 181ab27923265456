import sharp from 'sharp';
import t from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { fileTestApp } from '../helpers/app.js';
import { testBlobAdapter } from '../helpers/blobs.js';
import { everyStoreFileTestApp } from '../helpers/file-apps.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { PIXELS, SEED } from '../helpers/seed-tables.js';
import { testOnEveryStore } from '../helpers/store.js';
import { createAndAwait } from '../helpers/task-http.js';
import { testWorker } from '../helpers/worker.js';

/** The file's app with two in-process workers sharing its events, as `serve` runs them. */
const events = new TaskEvents();
const withWorkers = fileTestApp(
  { MAX_ACTIVE_TASKS: '1000', RATE_LIMIT_CREATES_PER_MIN: '100000', RATE_LIMIT_REQUESTS_PER_MIN: '100000' },
  { events },
);
t.before(() => {
  testWorker(t, withWorkers(), { events, concurrency: 2 }).start();
});

/** The file's app with its workers, and an account of the test's own. */
async function setup() {
  const harness = withWorkers();
  const account = await harness.newAccount(100_000);
  return { ...harness, ...account };
}

/** Apps without a worker, so that a task stays CREATED until it is canceled. */
const withoutWorkerOn = everyStoreFileTestApp(fileTestApp());

async function upload(h: Awaited<ReturnType<typeof setup>>): Promise<string> {
  const request = multipartRequest([filePart(await encodedImage('jpeg', 320, 240), { filename: 'ref.jpg' })]);
  const response = await h.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    payload: request.payload,
    headers: { ...h.auth, ...request.headers },
  });
  if (response.statusCode !== 201) throw new Error(`upload failed: ${response.body}`);
  return response.json().data.media_id;
}

/** Downloads a generated item through its signed URL, without the API key. */
async function download(h: Awaited<ReturnType<typeof setup>>, url: string) {
  const { pathname, search } = new URL(url);
  return h.app.inject({ url: pathname + search });
}

/**
 * The ratios of a model that its matrix renders: every one, but with blobs in S3 (lifecycle-s3.test.ts)
 * only the first, at every resolution. What the blob store is given is a result's bytes, whose size
 * the resolution decides; the ratio changes nothing there, and every ratio is rendered, stored and
 * downloaded by this file's run on the file system, in each pass of npm test.
 */
const matrixRatios = (ratios: string[]) => (testBlobAdapter().kind === 's3' ? ratios.slice(0, 1) : ratios);

for (const model of SEED) {
  const offer = { ratios: matrixRatios(model.aspectRatios), resolutions: Object.keys(model.costs) };
  const matrix =
    offer.ratios.length === model.aspectRatios.length
      ? 'every ratio and resolution'
      : `every resolution at ${offer.ratios[0]}`;
  for (const mode of ['text-to-image', 'image-to-image'] as const) {
    t.test(`${model.id} ${mode}: ${matrix} completes with the exact pixel size`, async (t) => {
      const h = await setup();
      const references = mode === 'image-to-image' ? [await upload(h), await upload(h)] : undefined;
      for (const ratio of offer.ratios) {
        for (const resolution of offer.resolutions) {
          const task = await createAndAwait(t, h, {
            model: model.id,
            prompt: `${mode} ${ratio} ${resolution}`,
            parameters: { aspect_ratio: ratio, resolution },
            ...(references ? { image_reference: references } : {}),
          });
          t.equal(task.status, 'COMPLETED', `${ratio} ${resolution} completed`);
          t.ok(task.started_at && task.completed_at, 'lifecycle times are set');
          const [item] = task.generated;
          const [width, height] = PIXELS[ratio][resolution];
          t.match(
            item,
            { width, height, content_type: 'image/png' },
            `${ratio} ${resolution} reports ${width}×${height}`,
          );
          const file = await download(h, item.url);
          t.equal(file.statusCode, 200, 'the signed URL downloads without a key');
          t.equal(file.headers['content-type'], 'image/png');
          const metadata = await sharp(file.rawPayload).metadata();
          t.same(
            [metadata.width, metadata.height],
            [width, height],
            `${ratio} ${resolution} decodes to ${width}×${height}`,
          );
          t.equal(file.rawPayload.length, item.size_bytes);
        }
      }
      await assertLedgerInvariant(t, h.store, h.accountId);
    });
  }
}

t.test('long-poll returns as soon as the task is terminal, and wait=0 returns at once', async (t) => {
  const h = await setup();
  const created = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: h.auth,
    payload: { model: 'beta-v5-pro', prompt: 'a tin robot' },
  });
  const taskId = created.json().data.task_id;
  const immediate = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=0`, headers: h.auth });
  t.equal(immediate.statusCode, 200);
  const waited = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=60`, headers: h.auth });
  t.equal(waited.json().data.status, 'COMPLETED');
  const tooLong = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=61`, headers: h.auth });
  t.equal(tooLong.statusCode, 400);
  t.match(tooLong.json().errors[0], { pointer: '/wait', location: 'query' });
});

testOnEveryStore(
  t,
  'cancel over HTTP: two at once give 200 CANCELED and 409 invalid_state, one refund; another account 404',
  async (t, storeAdapter) => {
    const h = await withoutWorkerOn(storeAdapter);
    const { auth, accountId } = await h.newAccount(100);
    const created = await h.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a quiet pond' },
    });
    const taskId = created.json().data.task_id;
    const other = await h.newAccount(100);
    t.equal(
      (await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: other.auth }))
        .statusCode,
      404,
    );

    const cancel = () =>
      h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: auth });
    const answers = await Promise.all([cancel(), cancel()]);
    t.same(answers.map((r) => r.statusCode).sort(), [200, 409]);
    const canceled = answers.find((r) => r.statusCode === 200)!;
    const again = answers.find((r) => r.statusCode === 409)!;
    t.equal(canceled.json().data.status, 'CANCELED');
    t.equal(again.json().code, 'invalid_state');
    t.same(await h.store.accounts.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 25 });
    t.equal((await h.store.accounts.getAccount(accountId))?.balance, 100);
    await assertLedgerInvariant(t, h.store, accountId);
  },
);
