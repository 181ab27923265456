import sharp from 'sharp';
import t, { type Test } from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { testWorker } from '../helpers/worker.js';

// DESIGN 3.2, written out rather than read back from the catalog.
const SIZES: Record<string, Record<string, [number, number]>> = {
  '1:1': { '1K': [1024, 1024], '2K': [2048, 2048], '4K': [4096, 4096] },
  '2:3': { '1K': [848, 1264], '2K': [1696, 2528], '4K': [3392, 5056] },
  '3:2': { '1K': [1264, 848], '2K': [2528, 1696], '4K': [5056, 3392] },
  '3:4': { '1K': [896, 1200], '2K': [1792, 2400], '4K': [3584, 4800] },
  '4:3': { '1K': [1200, 896], '2K': [2400, 1792], '4K': [4800, 3584] },
  '4:5': { '1K': [928, 1152], '2K': [1856, 2304], '4K': [3712, 4608] },
  '5:4': { '1K': [1152, 928], '2K': [2304, 1856], '4K': [4608, 3712] },
  '9:16': { '1K': [768, 1376], '2K': [1536, 2752], '4K': [3072, 5504] },
  '16:9': { '1K': [1376, 768], '2K': [2752, 1536], '4K': [5504, 3072] },
  '21:9': { '1K': [1584, 672], '2K': [3168, 1344], '4K': [6336, 2688] },
};
const OFFERED = {
  'alpha-pro': { ratios: ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'], resolutions: ['1K', '2K', '4K'] },
  'beta-v5-pro': { ratios: ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'], resolutions: ['1K', '2K'] },
};

/** One app with two in-process workers sharing its events, as `serve` runs them. */
async function setup(t: Test) {
  const events = new TaskEvents();
  const harness = await buildTestApp(t, { MAX_ACTIVE_TASKS: '1000', RATE_LIMIT_CREATES_PER_MIN: '100000', RATE_LIMIT_REQUESTS_PER_MIN: '100000' }, { events });
  const worker = testWorker(t, harness, { events, concurrency: 2 });
  worker.start();
  const account = await harness.newAccount(100_000);
  return { ...harness, ...account };
}

async function upload(h: Awaited<ReturnType<typeof setup>>): Promise<string> {
  const request = multipartRequest([filePart(await encodedImage('jpeg', 320, 240), { filename: 'ref.jpg' })]);
  const response = await h.app.inject({ method: 'POST', url: '/api/v1/media', payload: request.payload, headers: { ...h.auth, ...request.headers } });
  if (response.statusCode !== 201) throw new Error(`upload failed: ${response.body}`);
  return response.json().data.media_id;
}

async function createAndAwait(t: Test, h: Awaited<ReturnType<typeof setup>>, body: object) {
  const created = await h.app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: h.auth, payload: body });
  t.equal(created.statusCode, 202, 'accepted');
  const taskId = created.json().data.task_id;
  let task = created.json().data;
  for (let polls = 0; polls < 10 && !['COMPLETED', 'FAILED', 'CANCELED'].includes(task.status); polls++) {
    task = (await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=30`, headers: h.auth })).json().data;
  }
  return task;
}

/** Downloads a generated item through its signed URL, without the API key. */
async function download(h: Awaited<ReturnType<typeof setup>>, url: string) {
  const { pathname, search } = new URL(url);
  return h.app.inject({ url: pathname + search });
}

for (const [model, offer] of Object.entries(OFFERED)) {
  for (const mode of ['text-to-image', 'image-to-image'] as const) {
    t.test(`${model} ${mode}: every ratio and resolution completes with the exact pixel size`, async (t) => {
      const h = await setup(t);
      const references = mode === 'image-to-image' ? [await upload(h), await upload(h)] : undefined;
      for (const ratio of offer.ratios) {
        for (const resolution of offer.resolutions) {
          const task = await createAndAwait(t, h, {
            model,
            prompt: `${mode} ${ratio} ${resolution}`,
            parameters: { aspect_ratio: ratio, resolution },
            ...(references ? { image_reference: references } : {}),
          });
          t.equal(task.status, 'COMPLETED', `${ratio} ${resolution} completed`);
          t.ok(task.started_at && task.completed_at, 'lifecycle times are set');
          const [item] = task.generated;
          const [width, height] = SIZES[ratio][resolution];
          t.match(item, { width, height, content_type: 'image/png' }, `${ratio} ${resolution} reports ${width}×${height}`);
          const file = await download(h, item.url);
          t.equal(file.statusCode, 200, 'the signed URL downloads without a key');
          t.equal(file.headers['content-type'], 'image/png');
          const metadata = await sharp(file.rawPayload).metadata();
          t.same([metadata.width, metadata.height], [width, height], `${ratio} ${resolution} decodes to ${width}×${height}`);
          t.equal(file.rawPayload.length, item.size_bytes);
        }
      }
      await assertLedgerInvariant(t, h.store, h.accountId);
    });
  }
}

t.test('long-poll returns as soon as the task is terminal, and wait=0 returns at once', async (t) => {
  const h = await setup(t);
  const created = await h.app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: h.auth, payload: { model: 'beta-v5-pro', prompt: 'a tin robot' } });
  const taskId = created.json().data.task_id;
  const immediate = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=0`, headers: h.auth });
  t.equal(immediate.statusCode, 200);
  const waited = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=60`, headers: h.auth });
  t.equal(waited.json().data.status, 'COMPLETED');
  const tooLong = await h.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=61`, headers: h.auth });
  t.equal(tooLong.statusCode, 400);
  t.match(tooLong.json().errors[0], { pointer: '/wait', location: 'query' });
});

t.test('cancel over HTTP: 200 CANCELED with one refund; again 409 invalid_state; another account 404', async (t) => {
  const events = new TaskEvents();
  const h = await buildTestApp(t, {}, { events });
  const { auth, accountId } = await h.newAccount(100);
  const created = await h.app.inject({ method: 'POST', url: '/api/v1/images/generations', headers: auth, payload: { model: 'alpha-pro', prompt: 'a quiet pond' } });
  const taskId = created.json().data.task_id;
  const other = await h.newAccount(100);
  t.equal((await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: other.auth })).statusCode, 404);

  const canceled = await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: auth });
  t.equal(canceled.statusCode, 200);
  t.equal(canceled.json().data.status, 'CANCELED');
  const again = await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${taskId}/cancel`, headers: auth });
  t.equal(again.statusCode, 409);
  t.equal(again.json().code, 'invalid_state');
  t.same(await h.store.ledgerTotals(accountId), { grant: 100, debit: 25, refund: 25 });
  t.equal((await h.store.getAccount(accountId))?.balance, 100);
  await assertLedgerInvariant(t, h.store, accountId);
});
