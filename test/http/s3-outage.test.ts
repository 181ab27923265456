import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import type { BlobAdapterUnderTest } from '../helpers/blobs.js';
import { noisyImage } from '../helpers/images.js';
import { filePart, multipartRequest } from '../helpers/multipart.js';
import { s3BehindCuttingProxy } from '../helpers/s3.js';

/**
 * The S3 store away (s3rver behind a loopback proxy that resets and refuses its connections)
 * while clients upload: 503 with Retry-After, never 500 or 400, /readyz names the blob store, and
 * uploads succeed again once it is back, without a restart. (Tasks finishing meanwhile:
 * test/worker/storage-outage.test.ts.)
 */

t.test('S3 away: uploads 503 with Retry-After, /readyz blobs failing; back: uploads 201', async (t) => {
  const { proxy, blobs } = await s3BehindCuttingProxy(t);
  const s3BehindProxy: BlobAdapterUnderTest = {
    kind: 's3',
    open: async () => ({ blobs, env: {}, storedKeys: async () => [] }),
  };
  const { app, newAccount } = await buildTestApp(t, {}, { blobAdapter: s3BehindProxy });
  const { auth } = await newAccount(100);
  const png = await noisyImage(64, 64).png().toBuffer();
  const upload = () => {
    const request = multipartRequest([filePart(png, { filename: 'ref.png', contentType: 'image/png' })]);
    return app.inject({
      method: 'POST',
      url: '/api/v1/media',
      payload: request.payload,
      headers: { ...auth, ...request.headers },
    });
  };

  proxy.cut(60_000);
  const during = await Promise.all([upload(), upload(), upload()]);
  for (const response of during) {
    t.equal(response.statusCode, 503);
    t.equal(response.headers['retry-after'], '5');
    t.equal(response.json().code, 'unavailable');
  }
  const readyz = await app.inject({ method: 'GET', url: '/readyz' });
  t.equal(readyz.statusCode, 503);
  t.match(readyz.json(), { checks: { blobs: 'failing', store: 'ok' } });

  proxy.cut(0);
  const after = await upload();
  t.equal(after.statusCode, 201, 'uploads again once S3 is back, without a restart');
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
});
