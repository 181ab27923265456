import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import t, { type Test } from 'tap';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { publicBaseUrl } from '../../src/config.js';
import { HmacMediaUrlSigner } from '../../src/services/media-url-signer.js';
import { buildTestApp, fileTestApp, TEST_MEDIA_SIGNING_SECRET, type TestApp } from '../helpers/app.js';
import { CONTENT_TYPE_OF, encodedImage, noisyImage, type UploadFormat } from '../helpers/images.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';

const MEDIA = '/api/v1/media';
const TASKS = '/api/v1/images/generations';
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const HOUR_MS = 3600_000;
const START = new Date('2030-01-01T00:00:00.000Z');

type Auth = { authorization: string };

/** A clock the test moves; the app reads it for creation times, expiry and signatures. */
function testClock(start = START) {
  let current = start.getTime();
  return {
    now: () => new Date(current),
    advance: (ms: number) => {
      current += ms;
    },
  };
}

// One app for the file, each test with its own account, on one clock that tests only move
// forward and read relative to its current value (an upload's times are those of its upload).
const fileClock = testClock();
const fileApp = fileTestApp({}, { now: fileClock.now });
const clockedApp = () => ({ ...fileApp(), clock: fileClock });

function upload(
  app: FastifyInstance,
  auth: Auth | Record<string, never>,
  bytes: Buffer,
  options: { filename?: string; contentType?: string; headers?: Record<string, string> } = {},
) {
  const request = multipartRequest([filePart(bytes, options)]);
  return app.inject({
    method: 'POST',
    url: MEDIA,
    headers: { ...auth, ...request.headers, ...options.headers },
    payload: request.payload,
  });
}

async function uploaded(
  app: FastifyInstance,
  auth: Auth,
  bytes?: Buffer,
): Promise<{ media_id: string; sha256: string; [k: string]: unknown }> {
  const res = await upload(app, auth, bytes ?? (await encodedImage('png', 32, 24)));
  if (res.statusCode !== 201) throw new Error(`upload failed: ${res.statusCode} ${res.body}`);
  return res.json().data;
}

function assertProblem(t: Test, res: LightMyRequestResponse, status: number, code: string) {
  t.equal(res.statusCode, status, `status ${status}`);
  t.match(res.headers['content-type'], /^application\/problem\+json/);
  const body = res.json();
  t.equal(body.code, code, `code ${code}`);
  return body;
}

/** The path and query of a signed URL, for inject. */
function signedPath(ctx: TestApp, mediaId: string, at: Date): string {
  const signer = new HmacMediaUrlSigner(
    TEST_MEDIA_SIGNING_SECRET,
    publicBaseUrl(ctx.config),
    ctx.config.SIGNED_URL_TTL_SECONDS,
  );
  const url = new URL(signer.signedUrl(mediaId, at).url);
  return `${url.pathname}${url.search}`;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

for (const format of ['png', 'jpeg', 'webp'] as const satisfies readonly UploadFormat[]) {
  t.test(`a ${format.toUpperCase()} upload is stored, described and served back`, async (t) => {
    const ctx = clockedApp();
    const { auth } = await ctx.newAccount();
    const original = await encodedImage(format, 80, 60);
    const start = ctx.clock.now();

    const res = await upload(ctx.app, auth, original, {
      filename: `photo.${format}`,
      contentType: CONTENT_TYPE_OF[format],
    });
    t.equal(res.statusCode, 201, res.body);
    const media = res.json().data;
    t.match(media, {
      media_id: UUID_V7,
      content_type: CONTENT_TYPE_OF[format],
      width: 80,
      height: 60,
      size_bytes: Number,
      sha256: /^[0-9a-f]{64}$/,
      source: 'upload',
      created_at: start.toISOString(),
      expires_at: new Date(start.getTime() + 7 * 24 * HOUR_MS).toISOString(),
    });
    t.equal(res.headers.location, `${MEDIA}/${media.media_id}`);

    const record = await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}`, headers: auth });
    t.equal(record.statusCode, 200);
    t.same(record.json().data, media, 'the record reads back as created');

    const content = await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: auth });
    t.equal(content.statusCode, 200);
    t.equal(content.headers['content-type'], CONTENT_TYPE_OF[format]);
    t.equal(Number(content.headers['content-length']), media.size_bytes);
    t.equal(content.headers.etag, `"${media.sha256}"`);
    t.equal(content.headers['cache-control'], `private, max-age=${ctx.config.SIGNED_URL_TTL_SECONDS}`);
    t.equal(content.headers['x-content-type-options'], 'nosniff');
    t.equal(content.rawPayload.length, media.size_bytes);
    t.equal(sha256(content.rawPayload), media.sha256, 'sha256 is of the served bytes');
    t.match(
      await sharp(content.rawPayload).metadata(),
      { format, width: 80, height: 60 },
      'the bytes decode to the same image size',
    );
  });
}

t.test('the declared filename and type do not matter: a PNG sent as photo.jpg image/jpeg is a PNG', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const res = await upload(ctx.app, auth, await encodedImage('png', 10, 10), {
    filename: 'photo.jpg',
    contentType: 'image/jpeg',
  });
  t.equal(res.statusCode, 201);
  t.equal(res.json().data.content_type, 'image/png');
});

t.test('EXIF orientation is applied: a 60×20 JPEG shown rotated is stored as 20×60', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const rotated = await noisyImage(60, 20).jpeg().withMetadata({ orientation: 6 }).toBuffer();
  const media = await uploaded(ctx.app, auth, rotated);
  t.match(media, { width: 20, height: 60 });
  const content = await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: auth });
  const stored = await sharp(content.rawPayload).metadata();
  t.match(stored, { width: 20, height: 60 });
  t.equal(stored.orientation, undefined, 'no orientation tag left');
});

t.test('retention comes from UPLOAD_RETENTION_HOURS', async (t) => {
  // An app of its own: UPLOAD_RETENTION_HOURS is read when an app is built.
  const clock = testClock();
  const ctx = await buildTestApp(t, { UPLOAD_RETENTION_HOURS: '2' }, { now: clock.now });
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  t.equal(media.expires_at, new Date(START.getTime() + 2 * HOUR_MS).toISOString());
});

t.test('the spooled upload is removed whatever happens', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  await uploaded(ctx.app, auth);
  const rejected = await upload(ctx.app, auth, Buffer.from('not an image at all'));
  t.equal(rejected.statusCode, 415);
  t.same(await readdir(join(ctx.dataDir, 'tmp')), []);
});

for (const [model, max] of [
  ['alpha-pro', 8],
  ['beta-v5-pro', 10],
] as const) {
  t.test(
    `${model}: ${max} uploads (PNG, JPEG, WebP mixed) are accepted as references and ${max + 1} are not`,
    async (t) => {
      const ctx = clockedApp();
      const { auth } = await ctx.newAccount();
      const formats: UploadFormat[] = ['png', 'jpeg', 'webp'];
      const ids: string[] = [];
      for (let i = 0; i < max + 1; i++)
        ids.push((await uploaded(ctx.app, auth, await encodedImage(formats[i % 3], 24, 16))).media_id);

      const atMax = await ctx.app.inject({
        method: 'POST',
        url: TASKS,
        headers: auth,
        payload: { model, prompt: 'the same scene at dusk', image_reference: ids.slice(0, max) },
      });
      t.equal(atMax.statusCode, 202, atMax.body);
      t.same(atMax.json().data.image_reference, ids.slice(0, max));

      const overMax = await ctx.app.inject({
        method: 'POST',
        url: TASKS,
        headers: auth,
        payload: { model, prompt: 'the same scene at dusk', image_reference: ids },
      });
      const problem = assertProblem(t, overMax, 400, 'invalid_request');
      t.match(problem.errors[0], { pointer: '/image_reference', code: 'too_many_items' });
    },
  );
}

t.test('a reference to a foreign, deleted or expired media is a 422 pointing at its index', async (t) => {
  const ctx = clockedApp();
  const owner = await ctx.newAccount();
  const other = await ctx.newAccount();
  const mine = [
    await uploaded(ctx.app, owner.auth),
    await uploaded(ctx.app, owner.auth),
    await uploaded(ctx.app, owner.auth),
  ].map((m) => m.media_id);
  const foreign = (await uploaded(ctx.app, other.auth)).media_id;
  const deleted = (await uploaded(ctx.app, owner.auth)).media_id;
  t.equal(
    (await ctx.app.inject({ method: 'DELETE', url: `${MEDIA}/${deleted}`, headers: owner.auth })).statusCode,
    204,
  );

  const create = (refs: string[]) =>
    ctx.app.inject({
      method: 'POST',
      url: TASKS,
      headers: owner.auth,
      payload: { model: 'alpha-pro', prompt: 'a variation', image_reference: refs },
    });

  for (const [what, bad] of [
    ['foreign', foreign],
    ['deleted', deleted],
    ['never uploaded', '01890000-0000-7000-8000-000000000000'],
  ] as const) {
    const problem = assertProblem(t, await create([...mine, bad]), 422, 'invalid_media_reference');
    t.match(
      problem.errors,
      [{ pointer: '/image_reference/3', location: 'body' }],
      `${what} media is named by its index`,
    );
  }

  t.equal((await create(mine)).statusCode, 202, 'the good references alone are fine');
  ctx.clock.advance(7 * 24 * HOUR_MS);
  const expired = assertProblem(t, await create(mine), 422, 'invalid_media_reference');
  t.match(expired.errors, [{ pointer: '/image_reference/0' }], 'once expired, the first reference is named');
});

t.test('a signed URL serves the content without a key', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const res = await ctx.app.inject({ method: 'GET', url: signedPath(ctx, media.media_id, ctx.clock.now()) });
  t.equal(res.statusCode, 200, res.body);
  t.equal(sha256(res.rawPayload), media.sha256);
  const maxAge = Number(/max-age=(\d+)/.exec(String(res.headers['cache-control']))?.[1]);
  t.ok(maxAge > 0 && maxAge <= ctx.config.SIGNED_URL_TTL_SECONDS + 60, 'cached at most as long as the URL lives');
});

t.test('a signed URL fails once expired', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const path = signedPath(ctx, media.media_id, ctx.clock.now());
  ctx.clock.advance((ctx.config.SIGNED_URL_TTL_SECONDS + 60) * 1000);
  const problem = assertProblem(t, await ctx.app.inject({ method: 'GET', url: path }), 401, 'unauthorized');
  t.match(problem.detail, /expired/);
});

t.test('a tampered signed URL fails with 401', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const otherMedia = await uploaded(ctx.app, auth);
  const path = signedPath(ctx, media.media_id, ctx.clock.now());
  const url = new URL(path, 'http://x');
  const signature = url.searchParams.get('signature')!;
  const expires = Number(url.searchParams.get('expires'));

  const flipped = `${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
  const tampered = {
    'another signature': `${url.pathname}?expires=${expires}&signature=${flipped}`,
    'a later expiry': `${url.pathname}?expires=${expires + 3600}&signature=${signature}`,
    'another media id': `${MEDIA}/${otherMedia.media_id}/content?expires=${expires}&signature=${signature}`,
    'no signature': `${url.pathname}?expires=${expires}`,
    'no expiry': `${url.pathname}?signature=${signature}`,
  };
  for (const [what, tamperedPath] of Object.entries(tampered)) {
    const res = await ctx.app.inject({ method: 'GET', url: tamperedPath });
    t.equal(res.statusCode, 401, what);
    t.equal(res.json().code, 'unauthorized', what);
  }
});

t.test('a valid signature decides even when another account sends its key', async (t) => {
  const ctx = clockedApp();
  const owner = await ctx.newAccount();
  const other = await ctx.newAccount();
  const media = await uploaded(ctx.app, owner.auth);
  const res = await ctx.app.inject({
    method: 'GET',
    url: signedPath(ctx, media.media_id, ctx.clock.now()),
    headers: other.auth,
  });
  t.equal(res.statusCode, 200);
});

t.test('a signed URL of a deleted media is a 404', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const path = signedPath(ctx, media.media_id, ctx.clock.now());
  await ctx.app.inject({ method: 'DELETE', url: `${MEDIA}/${media.media_id}`, headers: auth });
  assertProblem(t, await ctx.app.inject({ method: 'GET', url: path }), 404, 'not_found');
});

t.test('content needs a key or a signature; the record and the upload need a key', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const content = assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content` }),
    401,
    'unauthorized',
  );
  t.match(content.detail, /signed URL/);
  assertProblem(t, await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}` }), 401, 'unauthorized');
  assertProblem(t, await ctx.app.inject({ method: 'DELETE', url: `${MEDIA}/${media.media_id}` }), 401, 'unauthorized');
  assertProblem(t, await upload(ctx.app, {}, await encodedImage('png', 8, 8)), 401, 'unauthorized');
  const badKey = { authorization: 'Bearer igk_not-a-real-key' };
  assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: badKey }),
    401,
    'unauthorized',
  );
});

t.test('another account can neither read nor delete the media', async (t) => {
  const ctx = clockedApp();
  const owner = await ctx.newAccount();
  const other = await ctx.newAccount();
  const media = await uploaded(ctx.app, owner.auth);
  for (const [method, url] of [
    ['GET', `${MEDIA}/${media.media_id}`],
    ['GET', `${MEDIA}/${media.media_id}/content`],
    ['DELETE', `${MEDIA}/${media.media_id}`],
  ] as const) {
    assertProblem(t, await ctx.app.inject({ method, url, headers: other.auth }), 404, 'not_found');
  }
  t.equal(
    (await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: owner.auth }))
      .statusCode,
    200,
    'still there for its owner',
  );
});

t.test('DELETE removes the record, the content and the blob', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  // The blobs of the file's other tests are there too: what is compared is what this upload and
  // this delete change.
  const blobsBefore = await ctx.storedBlobKeys();
  const media = await uploaded(ctx.app, auth);
  const blobKey = `media/${media.media_id}`;
  t.same(await ctx.storedBlobKeys(), [...blobsBefore, blobKey].sort(), 'the blob is stored');

  const dueBefore = await ctx.store.media.listDueBlobDeletions(new Date(8.64e15), 10_000);
  const res = await ctx.app.inject({ method: 'DELETE', url: `${MEDIA}/${media.media_id}`, headers: auth });
  t.equal(res.statusCode, 204);
  t.equal(res.body, '');
  t.same(await ctx.storedBlobKeys(), blobsBefore, 'the blob is gone');
  t.same(
    await ctx.store.media.listDueBlobDeletions(new Date(8.64e15), 10_000),
    dueBefore,
    'nothing left for the sweeper',
  );
  assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}`, headers: auth }),
    404,
    'not_found',
  );
  assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: auth }),
    404,
    'not_found',
  );
  assertProblem(
    t,
    await ctx.app.inject({ method: 'DELETE', url: `${MEDIA}/${media.media_id}`, headers: auth }),
    404,
    'not_found',
  );
});

t.test('expired media are gone before the sweeper runs', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  ctx.clock.advance(7 * 24 * HOUR_MS);
  assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}`, headers: auth }),
    404,
    'not_found',
  );
  assertProblem(
    t,
    await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: auth }),
    404,
    'not_found',
  );
});

t.test('If-None-Match with the ETag gives 304 without a body', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const url = `${MEDIA}/${media.media_id}/content`;
  const etag = `"${media.sha256}"`;
  for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: { ...auth, 'if-none-match': header } });
    t.equal(res.statusCode, 304, header);
    t.equal(res.rawPayload.length, 0);
    t.equal(res.headers.etag, etag);
    t.match(res.headers['cache-control'], /^private, max-age=\d+$/);
  }
  const changed = await ctx.app.inject({
    method: 'GET',
    url,
    headers: { ...auth, 'if-none-match': '"something-else"' },
  });
  t.equal(changed.statusCode, 200);
});

t.test('a byte range is a 206 with exactly those bytes', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const url = `${MEDIA}/${media.media_id}/content`;
  const whole = (await ctx.app.inject({ method: 'GET', url, headers: auth })).rawPayload;
  t.equal(whole.length, media.size_bytes);
  const size = whole.length;
  for (const [range, start, end] of [
    ['bytes=0-9', 0, 9],
    ['bytes=10-', 10, size - 1],
    ['bytes=-7', size - 7, size - 1],
    [`bytes=5-${size + 100}`, 5, size - 1],
    // A suffix longer than the file is the whole file (RFC 9110 14.1.3), as a 206.
    ['bytes=-99999999', 0, size - 1],
    // Ranges that overlap or touch are one range; others are served whole (the test below).
    ['bytes=0-9,5-20', 0, 20],
    ['bytes=0-9,10-19', 0, 19],
  ] as const) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: { ...auth, range } });
    t.equal(res.statusCode, 206, range);
    t.equal(res.headers['content-range'], `bytes ${start}-${end}/${size}`);
    t.equal(res.headers['content-length'], String(end - start + 1));
    t.equal(res.headers['accept-ranges'], 'bytes');
    t.same(res.rawPayload, whole.subarray(start, end + 1), `${range}: the bytes of that range`);
  }
});

t.test('a range outside the content is a 416 naming its size; what a server may ignore gives it all', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const url = `${MEDIA}/${media.media_id}/content`;
  const size = media.size_bytes as number;
  const outside = await ctx.app.inject({ method: 'GET', url, headers: { ...auth, range: `bytes=${size}-` } });
  t.equal(outside.statusCode, 416);
  t.equal(outside.headers['content-range'], `bytes */${size}`);
  t.equal(outside.json().code, 'range_not_satisfiable');

  const etag = `"${media.sha256}"`;
  for (const headers of [
    { range: 'bytes=0-1,5-6' },
    { range: 'items=0-1' },
    { range: 'bytes=x-y' },
    { range: 'bytes=0-9', 'if-range': '"an older version"' },
  ]) {
    const res = await ctx.app.inject({ method: 'GET', url, headers: { ...auth, ...headers } });
    t.equal(res.statusCode, 200, JSON.stringify(headers));
    t.equal(res.rawPayload.length, size);
  }
  const current = await ctx.app.inject({
    method: 'GET',
    url,
    headers: { ...auth, range: 'bytes=0-9', 'if-range': etag },
  });
  t.equal(current.statusCode, 206, 'If-Range with the current ETag keeps the range');
});

t.test('the cache lifetime never outlasts the media', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  ctx.clock.advance(7 * 24 * HOUR_MS - 100_000);
  const res = await ctx.app.inject({ method: 'GET', url: `${MEDIA}/${media.media_id}/content`, headers: auth });
  t.equal(res.headers['cache-control'], 'private, max-age=100');
});

t.test('HEAD of the content gives its headers and no body', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const media = await uploaded(ctx.app, auth);
  const res = await ctx.app.inject({ method: 'HEAD', url: `${MEDIA}/${media.media_id}/content`, headers: auth });
  t.equal(res.statusCode, 200);
  t.equal(res.headers.etag, `"${media.sha256}"`);
  t.equal(res.rawPayload.length, 0);
});

t.test('an Idempotency-Key replays the first upload and refuses other bytes', async (t) => {
  const ctx = clockedApp();
  const { auth } = await ctx.newAccount();
  const bytes = await encodedImage('png', 16, 16);
  const headers = { 'idempotency-key': 'upload-1' };
  const first = await upload(ctx.app, auth, bytes, { headers });
  t.equal(first.statusCode, 201);
  const again = await upload(ctx.app, auth, bytes, { headers });
  t.equal(again.statusCode, 201);
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal(again.json().data.media_id, first.json().data.media_id, 'the same media, not a second one');
  t.equal(again.headers.location, first.headers.location);
  assertProblem(
    t,
    await upload(ctx.app, auth, await encodedImage('png', 16, 16), { headers }),
    422,
    'idempotency_key_reused',
  );
});

t.test('readiness checks the blob storage', async (t) => {
  const ctx = clockedApp();
  const res = await ctx.app.inject({ method: 'GET', url: '/readyz' });
  t.equal(res.statusCode, 200);
  t.equal(res.json().checks.blobs, 'ok');
});

t.test('the OpenAPI document describes the upload as multipart with one binary `file`', async (t) => {
  const ctx = clockedApp();
  await ctx.app.ready();
  const document = ctx.app.swagger() as any;
  const upload = document.paths['/api/v1/media'].post;
  // A binary string, so that schema-driven tools generate bytes for it (Swagger UI shows a file
  // picker; the generated client takes a Blob through openapi-typescript's transform for binary).
  t.match(upload.requestBody.content['multipart/form-data'].schema, {
    required: ['file'],
    properties: { file: { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream' } },
  });
  for (const status of ['201', '400', '401', '413', '415', '422'])
    t.ok(upload.responses[status], `documents ${status}`);
  const content = document.paths['/api/v1/media/{media_id}/content'].get;
  t.ok(content.responses['200'].content['image/png']);
  t.ok(content.responses['304']);
  t.ok(document.components.schemas.Media);
});
