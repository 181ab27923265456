// Not in the PostgreSQL pass: the static page and its assets; no request reaches the store.
import t from 'tap';
import { loadConfig } from '../../src/config.js';
import { playgroundContentSecurityPolicy } from '../../src/http/routes/pages.js';
import { fileTestApp } from '../helpers/app.js';
import { assertPageServed, builtPlayground } from '../helpers/playground.js';

// One app serving the built Playground for the file's tests of it; PLAYGROUND=false is read when
// an app is built, so the test of it has an app of that configuration.
const playgroundDir = await builtPlayground();
const ctx = fileTestApp({}, { playgroundDir });
const withoutPlayground = fileTestApp({ PLAYGROUND: 'false' }, { playgroundDir });

t.test('GET /playground: the page, its script, styles and icon, with the security headers', async (t) => {
  const { app } = ctx();
  const page = await assertPageServed(t, app, 'playground');
  t.equal(page.headers['content-security-policy'], playgroundContentSecurityPolicy(ctx().config));
});

t.test('PLAYGROUND=false: no page', async (t) => {
  const { app } = withoutPlayground();
  t.equal((await app.inject({ url: '/playground' })).statusCode, 404);
  t.equal((await app.inject({ url: '/playground/playground.js' })).statusCode, 404);
});

t.test('the CSP lets images come from the result URLs and, with presigned downloads, the bucket', async (t) => {
  const imagesOf = (env: Record<string, string>) =>
    playgroundContentSecurityPolicy(loadConfig({ DATA_DIR: t.testdir(), ...env }))
      .split('; ')
      .find((directive) => directive.startsWith('img-src '));
  t.equal(
    imagesOf({ PUBLIC_BASE_URL: 'https://images.example.com/' }),
    "img-src 'self' blob: https://images.example.com",
  );
  t.equal(
    imagesOf({
      PUBLIC_BASE_URL: 'https://api.example.com',
      BLOB_STORE: 's3',
      S3_BUCKET: 'pics',
      S3_REGION: 'eu-west-1',
      S3_PRESIGNED_DOWNLOADS: 'true',
    }),
    "img-src 'self' blob: https://api.example.com https://s3.eu-west-1.amazonaws.com https://pics.s3.eu-west-1.amazonaws.com",
  );
  t.equal(
    imagesOf({
      PUBLIC_BASE_URL: 'https://api.example.com',
      BLOB_STORE: 's3',
      S3_BUCKET: 'pics',
      S3_REGION: 'auto',
      S3_ENDPOINT: 'https://acct.r2.cloudflarestorage.com',
      S3_PRESIGNED_DOWNLOADS: 'true',
    }),
    "img-src 'self' blob: https://api.example.com https://acct.r2.cloudflarestorage.com https://pics.acct.r2.cloudflarestorage.com",
  );
  t.equal(
    imagesOf({ PUBLIC_BASE_URL: 'https://api.example.com', BLOB_STORE: 's3', S3_BUCKET: 'pics', S3_REGION: 'auto' }),
    "img-src 'self' blob: https://api.example.com",
    'without presigned downloads the API streams the bytes itself',
  );
});

t.test('the page names its icon, which is served under the same CSP (no favicon 404 in the console)', async (t) => {
  const { app } = ctx();
  const page = await app.inject({ url: '/playground' });
  const href = /<link rel="icon" href="([^"]+)" type="image\/svg\+xml">/.exec(page.body)?.[1];
  t.equal(href, '/playground/favicon.svg');
  const icon = await app.inject({ url: href! });
  t.equal(icon.statusCode, 200);
  t.match(icon.headers['content-type'], /^image\/svg\+xml/);
  t.match(icon.body, /^<svg /);
  // An icon is an image to the CSP: the page's img-src 'self' allows its own origin.
  t.match(page.headers['content-security-policy'], /img-src 'self'/);
});
