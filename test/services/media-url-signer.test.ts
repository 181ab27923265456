// Not in the PostgreSQL pass: signing and checking media URLs, no store.
import t from 'tap';
import { HmacMediaUrlSigner } from '../../src/services/media-url-signer.js';

const SECRET = 'test-signing-secret-0123456789abcdef';
const MEDIA = '0193c1f0-0000-7000-8000-000000000001';
const OTHER = '0193c1f0-0000-7000-8000-000000000002';
const at = (iso: string) => new Date(iso);
const paramsOf = (url: string) => {
  const query = new URL(url).searchParams;
  return { expires: Number(query.get('expires')), signature: query.get('signature')! };
};

t.test('within a minute a media id gets the same URL; in the next minute a new one, and both verify', async (t) => {
  const signer = new HmacMediaUrlSigner(SECRET, 'http://127.0.0.1:3000', 3600);
  const first = signer.signedUrl(MEDIA, at('2030-01-01T00:00:10.000Z'));
  const again = signer.signedUrl(MEDIA, at('2030-01-01T00:00:50.000Z'));
  t.equal(again.url, first.url);
  t.equal(again.expiresAt.toISOString(), '2030-01-01T01:01:00.000Z');
  const next = signer.signedUrl(MEDIA, at('2030-01-01T00:01:10.000Z'));
  t.not(next.url, first.url);
  t.equal(next.expiresAt.toISOString(), '2030-01-01T01:02:00.000Z');
  const now = at('2030-01-01T00:01:20.000Z');
  for (const { url } of [first, next]) {
    const { expires, signature } = paramsOf(url);
    t.ok(signer.verify(MEDIA, expires, signature, now), url);
    t.notOk(signer.verify(OTHER, expires, signature, now), 'not for another media id');
  }
});

t.test('a URL remembered for one media id is never handed out for another', async (t) => {
  const signer = new HmacMediaUrlSigner(SECRET, 'http://127.0.0.1:3000', 3600);
  const now = at('2030-01-01T00:00:10.000Z');
  const a = signer.signedUrl(MEDIA, now);
  const b = signer.signedUrl(OTHER, now);
  t.not(a.url, b.url);
  t.match(b.url, `/media/${OTHER}/content?`);
  t.equal(signer.signedUrl(MEDIA, now).url, a.url);
});

t.test('the expiry handed out is a fresh Date each time (callers cannot change a remembered one)', async (t) => {
  const signer = new HmacMediaUrlSigner(SECRET, 'http://127.0.0.1:3000', 3600);
  const now = at('2030-01-01T00:00:10.000Z');
  signer.signedUrl(MEDIA, now).expiresAt.setTime(0);
  t.equal(signer.signedUrl(MEDIA, now).expiresAt.toISOString(), '2030-01-01T01:01:00.000Z');
});
