import sharp from 'sharp';
import t, { type Test } from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';
import { fileTestApp } from '../helpers/app.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { PIXELS } from '../helpers/seed-tables.js';
import { createAndAwait } from '../helpers/task-http.js';
import { testWorker } from '../helpers/worker.js';

/**
 * Decision 0024: a result is stored in the task's output format at the exact catalog pixel size,
 * and is listed, described, downloaded and ranged as that format (on the store and blob store
 * TEST_STORE and TEST_BLOBS name).
 */
const SHARP_FORMAT = { png: 'png', jpeg: 'jpeg', webp: 'webp' } as const;
const CONTENT_TYPE = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' } as const;
const EXTENSION = { png: 'png', jpeg: 'jpg', webp: 'webp' } as const;
type Format = keyof typeof CONTENT_TYPE;

/** The file's app with its worker; each test has an account of its own. */
const events = new TaskEvents();
const withWorker = fileTestApp(
  { MAX_ACTIVE_TASKS: '1000', RATE_LIMIT_CREATES_PER_MIN: '100000', RATE_LIMIT_REQUESTS_PER_MIN: '100000' },
  { events },
);
t.before(() => {
  testWorker(t, withWorker(), { events }).start();
});

async function setup() {
  const harness = withWorker();
  return { ...harness, ...(await harness.newAccount(100_000)) };
}
type Harness = Awaited<ReturnType<typeof setup>>;

async function completed(t: Test, h: Harness, body: object) {
  const task = await createAndAwait(t, h, body);
  t.equal(task.status, 'COMPLETED', JSON.stringify(task.error));
  return task;
}

/** The signed URL's path and query, fetched without the key. */
const signedPath = (url: string) => {
  const { pathname, search } = new URL(url);
  return pathname + search;
};

const cases: { model: string; ratio: string; resolution: string; format: Format; compression?: number }[] = [
  { model: 'alpha-pro', ratio: '16:9', resolution: '4K', format: 'webp' },
  { model: 'alpha-pro', ratio: '2:3', resolution: '2K', format: 'jpeg', compression: 60 },
  { model: 'alpha-pro', ratio: '1:1', resolution: '1K', format: 'png' },
  { model: 'beta-v5-pro', ratio: '21:9', resolution: '2K', format: 'webp', compression: 90 },
  { model: 'beta-v5-pro', ratio: '3:4', resolution: '1K', format: 'jpeg' },
  { model: 'beta-v5-pro', ratio: '9:16', resolution: '2K', format: 'png' },
];

for (const { model, ratio, resolution, format, compression } of cases) {
  t.test(
    `${model} ${ratio} ${resolution} as ${format}: stored, listed, described, downloaded and ranged as ${format}`,
    async (t) => {
      const h = await setup();
      const [width, height] = PIXELS[ratio][resolution];
      const parameters = {
        aspect_ratio: ratio,
        resolution,
        output_format: format,
        ...(compression === undefined ? {} : { output_compression: compression }),
      };
      const task = await completed(t, h, { model, prompt: `a lighthouse as ${format}`, parameters });
      t.strictSame(task.parameters, {
        aspect_ratio: ratio,
        resolution,
        output_format: format,
        output_compression: format === 'png' ? null : (compression ?? 80),
        seed: task.parameters.seed,
      });
      const [item] = task.generated;
      t.match(item, { width, height, content_type: CONTENT_TYPE[format] });

      const file = await h.app.inject({ url: signedPath(item.url) });
      t.equal(file.statusCode, 200);
      t.equal(file.headers['content-type'], CONTENT_TYPE[format]);
      t.match(String(file.headers['content-disposition'] ?? ''), new RegExp(`\\.${EXTENSION[format]}"?$`));
      t.equal(file.rawPayload.length, item.size_bytes, 'size_bytes is the stored size');
      const metadata = await sharp(file.rawPayload).metadata();
      t.equal(metadata.format, SHARP_FORMAT[format], `decodes as ${format}`);
      t.same([metadata.width, metadata.height], [width, height], `at exactly ${width}×${height}`);

      const media = await h.app.inject({ url: `/api/v1/media/${item.media_id}`, headers: h.auth });
      t.match(media.json().data, { content_type: CONTENT_TYPE[format], width, height, size_bytes: item.size_bytes });

      const range = await h.app.inject({ url: signedPath(item.url), headers: { range: 'bytes=0-15' } });
      t.equal(range.statusCode, 206);
      t.equal(range.headers['content-type'], CONTENT_TYPE[format]);
      t.equal(range.headers['content-range'], `bytes 0-15/${item.size_bytes}`);
      t.same(range.rawPayload, file.rawPayload.subarray(0, 16));
      await assertLedgerInvariant(t, h.store, h.accountId);
    },
  );
}

t.test('output_compression is the encoder quality: a lower one makes a smaller file of the same picture', async (t) => {
  const h = await setup();
  for (const format of ['jpeg', 'webp'] as const) {
    const sizes: number[] = [];
    for (const output_compression of [10, 95]) {
      const task = await completed(t, h, {
        model: 'beta-v5-pro',
        prompt: 'the same harbour',
        parameters: { aspect_ratio: '1:1', resolution: '1K', output_format: format, output_compression },
      });
      sizes.push(task.generated[0].size_bytes);
    }
    t.ok(sizes[0] < sizes[1], `${format}: quality 10 gives ${sizes[0]} bytes, quality 95 gives ${sizes[1]}`);
  }
});

t.test('a lossy format costs what the PNG costs', async (t) => {
  const h = await setup();
  for (const format of ['png', 'jpeg', 'webp']) {
    const estimate = await h.app.inject({
      method: 'POST',
      url: '/api/v1/images/estimates',
      headers: h.auth,
      payload: { model: 'beta-v5-pro', prompt: 'abc', parameters: { resolution: '2K', output_format: format } },
    });
    t.equal(estimate.statusCode, 200);
    t.equal(estimate.json().data.cost, 50, format);
  }
});

t.test('the models list the output formats they offer', async (t) => {
  const h = await setup();
  const models = (await h.app.inject({ url: '/api/v1/models', headers: h.auth })).json().data;
  for (const model of models) t.strictSame(model.output_formats, ['png', 'jpeg', 'webp'], model.id);
});
