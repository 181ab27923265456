import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { testBlobAdapter } from '../helpers/blobs.js';
import { encodedImage } from '../helpers/images.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { TEST_BUCKET } from '../helpers/s3.js';
import { testWorker } from '../helpers/worker.js';

const MEDIA = '/api/v1/media';

/** An app on S3 (s3rver) with S3_PRESIGNED_DOWNLOADS=true, and one in-process worker. */
async function presigningApp(t: Test, env: Record<string, string> = {}) {
  const ctx = await buildTestApp(
    t,
    { BLOB_STORE: 's3', S3_BUCKET: TEST_BUCKET, S3_REGION: 'us-east-1', S3_PRESIGNED_DOWNLOADS: 'true', ...env },
    { blobAdapter: testBlobAdapter('s3') },
  );
  return { ...ctx, ...(await ctx.newAccount()) };
}

async function uploadPng(ctx: Awaited<ReturnType<typeof presigningApp>>) {
  const png = await encodedImage('png', 40, 30);
  const request = multipartRequest([filePart(png)]);
  const res = await ctx.app.inject({
    method: 'POST',
    url: MEDIA,
    headers: { ...ctx.auth, ...request.headers },
    payload: request.payload,
  });
  t.equal(res.statusCode, 201);
  return res.json().data as { media_id: string; sha256: string; size_bytes: number };
}

t.test("with the owner's key, content is a 302 to a presigned GET that serves the bytes", async (t) => {
  const ctx = await presigningApp(t);
  const media = await uploadPng(ctx);
  const res = await ctx.app.inject({ url: `${MEDIA}/${media.media_id}/content`, headers: ctx.auth });
  t.equal(res.statusCode, 302);
  t.equal(res.headers.etag, `"${media.sha256}"`);
  t.equal(res.headers['cache-control'], 'no-store', 'the redirect is not cached; its URL lives for minutes');
  t.equal(res.body, '');
  const location = new URL(res.headers.location as string);
  t.equal(location.searchParams.get('X-Amz-Expires'), '300', 'S3_PRESIGNED_URL_TTL_SECONDS');

  const direct = await fetch(location);
  t.equal(direct.status, 200);
  t.equal(direct.headers.get('content-type'), 'image/png');
  t.equal(direct.headers.get('content-disposition'), `inline; filename="${media.media_id}.png"`);
  t.match(direct.headers.get('cache-control'), /^private, max-age=\d+$/);
  const bytes = Buffer.from(await direct.arrayBuffer());
  t.equal(bytes.length, media.size_bytes);
  const stored = await ctx.blobs.getBuffer(`media/${media.media_id}`);
  t.same(bytes, stored, 'the bytes the API would have streamed');
});

t.test('a matching If-None-Match is still a 304 from the API, without a redirect', async (t) => {
  const ctx = await presigningApp(t);
  const media = await uploadPng(ctx);
  const res = await ctx.app.inject({
    url: `${MEDIA}/${media.media_id}/content`,
    headers: { ...ctx.auth, 'if-none-match': `"${media.sha256}"` },
  });
  t.equal(res.statusCode, 304);
  t.notOk(res.headers.location);
});

t.test("a presigned URL never outlives the API's own cache lifetime", async (t) => {
  const ctx = await presigningApp(t, { SIGNED_URL_TTL_SECONDS: '60' });
  const media = await uploadPng(ctx);
  const res = await ctx.app.inject({ url: `${MEDIA}/${media.media_id}/content`, headers: ctx.auth });
  t.equal(new URL(res.headers.location as string).searchParams.get('X-Amz-Expires'), '60');
});

t.test("a generated item's signed url redirects to the result in S3; a bad signature does not", async (t) => {
  const ctx = await presigningApp(t);
  testWorker(t, ctx).start();
  const created = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: ctx.auth,
    payload: { model: 'beta-v5-pro', prompt: 'a lighthouse at dawn' },
  });
  const taskId = created.json().data.task_id;
  const task = (await ctx.app.inject({ url: `/api/v1/images/generations/${taskId}?wait=30`, headers: ctx.auth })).json()
    .data;
  t.equal(task.status, 'COMPLETED');
  const [item] = task.generated;
  const signed = new URL(item.url);
  const res = await ctx.app.inject({ url: signed.pathname + signed.search });
  t.equal(res.statusCode, 302, 'no key needed: the signature decides');
  const direct = await fetch(res.headers.location as string);
  t.equal(direct.status, 200);
  t.equal(Buffer.from(await direct.arrayBuffer()).length, item.size_bytes);

  signed.searchParams.set('signature', 'A'.repeat(43));
  const forged = await ctx.app.inject({ url: signed.pathname + signed.search });
  t.equal(forged.statusCode, 401);
  t.notOk(forged.headers.location);
});
