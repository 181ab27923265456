import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import t from 'tap';
import { buildTestApp, fileTestApp } from '../helpers/app.js';
import { encodedImage, noisyImage, pngWithHeader } from '../helpers/images.js';
import { BOUNDARY, filePart, multipartBody, multipartRequest, type FormPart } from '../helpers/multipart.js';

/**
 * Every way an upload can be wrong, each with the status and code a client gets. The accepted
 * cases at the end are the ones a naive check would refuse (or a careless one keep as sent).
 */

// One app for the file, each test with its own account; a case that needs other limits builds an
// app with them.
const shared = fileTestApp();

const MAX_BYTES = 20 * 1024 * 1024;
const MULTIPART = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };

interface Request {
  headers: Record<string, string>;
  payload?: Buffer | string;
}

interface Rejected {
  status: number;
  code: string;
  /** The JSON Pointer of the first field error, when the problem names a part. */
  pointer?: string;
}

interface Case {
  name: string;
  request: () => Promise<Request>;
  expect: Rejected | { accepted: string };
  env?: Record<string, string>;
}

const form = (parts: FormPart[], options?: { close?: boolean }) => async (): Promise<Request> =>
  multipartRequest(parts, options);
const oneFile =
  (bytes: () => Promise<Buffer> | Buffer, options?: { name?: string; filename?: string; contentType?: string }) =>
  async () =>
    multipartRequest([filePart(await bytes(), options)]);

const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>';
const bmp = () => Buffer.concat([Buffer.from('BM'), randomBytes(200)]);
const pdf = () => Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');
// A leading zero byte rules out random bytes that happen to start with a signature.
const noise = () => Buffer.concat([Buffer.from([0]), randomBytes(4095)]);
const half = async (bytes: Promise<Buffer>) => {
  const whole = await bytes;
  return whole.subarray(0, whole.length >> 1);
};

const cases: Case[] = [
  // ── the shape of the body ──
  {
    name: 'an empty file',
    request: oneFile(() => Buffer.alloc(0)),
    expect: { status: 400, code: 'invalid_request', pointer: '/file' },
  },
  {
    name: 'no `file` part: the image under another name',
    request: oneFile(() => encodedImage('png', 8, 8), { name: 'image', filename: 'a.png' }),
    expect: { status: 400, code: 'invalid_request', pointer: '/image' },
  },
  { name: 'no parts at all', request: form([]), expect: { status: 400, code: 'invalid_request', pointer: '/file' } },
  {
    name: 'only a text field',
    request: form([{ name: 'note', data: 'hello' }]),
    expect: { status: 400, code: 'invalid_request', pointer: '/note' },
  },
  {
    name: 'two files in two `file` parts',
    request: async () =>
      multipartRequest([filePart(await encodedImage('png', 8, 8)), filePart(await encodedImage('png', 8, 8))]),
    expect: { status: 400, code: 'invalid_request', pointer: '/file' },
  },
  {
    name: 'the file and a second file under another name',
    request: async () =>
      multipartRequest([
        filePart(await encodedImage('png', 8, 8)),
        filePart(await encodedImage('png', 8, 8), { name: 'extra', filename: 'b.png' }),
      ]),
    expect: { status: 400, code: 'invalid_request', pointer: '/file' },
  },
  {
    name: 'the file followed by a text field',
    request: async () =>
      multipartRequest([filePart(await encodedImage('png', 8, 8)), { name: 'caption', data: 'a cat' }]),
    expect: { status: 400, code: 'invalid_request', pointer: '/caption' },
  },
  {
    name: 'too many fields',
    request: async () =>
      multipartRequest([
        ...Array.from({ length: 20 }, (_, i) => ({ name: `field${i}`, data: 'x' })),
        filePart(await encodedImage('png', 8, 8)),
      ]),
    expect: { status: 400, code: 'invalid_request', pointer: '/field0' },
  },
  {
    name: 'a body cut off in the middle of the file',
    request: async () => multipartRequest([filePart(await encodedImage('png', 64, 64))], { close: false }),
    expect: { status: 400, code: 'invalid_request' },
  },
  {
    name: 'multipart/form-data without a boundary',
    request: async () => ({
      headers: { 'content-type': 'multipart/form-data' },
      payload: multipartBody([filePart(await encodedImage('png', 8, 8))]),
    }),
    expect: { status: 400, code: 'invalid_request' },
  },
  // ── the size ──
  {
    name: '20 MiB + 1 byte',
    request: oneFile(() => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(MAX_BYTES + 1 - 8)])),
    expect: { status: 413, code: 'payload_too_large', pointer: '/file' },
  },
  {
    name: 'exactly 20 MiB is not too large (it is refused for what it is)',
    request: oneFile(() => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(MAX_BYTES - 8)])),
    expect: { status: 422, code: 'invalid_image', pointer: '/file' },
  },
  {
    name: 'a smaller configured UPLOAD_MAX_BYTES + 1',
    env: { UPLOAD_MAX_BYTES: '1000' },
    request: oneFile(() => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), randomBytes(993)])),
    expect: { status: 413, code: 'payload_too_large', pointer: '/file' },
  },
  // ── the type, by the bytes ──
  {
    name: 'a text file named .png',
    request: oneFile(() => Buffer.from('just some text\n'), { filename: 'cat.png', contentType: 'image/png' }),
    expect: { status: 415, code: 'unsupported_media_type', pointer: '/file' },
  },
  {
    name: 'an SVG',
    request: oneFile(() => Buffer.from(svg), { filename: 'logo.svg', contentType: 'image/svg+xml' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a GIF',
    request: oneFile(() => noisyImage(16, 16).gif().toBuffer(), { filename: 'a.gif', contentType: 'image/gif' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a TIFF',
    request: oneFile(() => noisyImage(16, 16).tiff().toBuffer(), { filename: 'a.tiff', contentType: 'image/tiff' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a BMP header',
    request: oneFile(bmp, { filename: 'a.bmp', contentType: 'image/bmp' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a PDF',
    request: oneFile(pdf, { filename: 'a.png', contentType: 'image/png' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  { name: 'random bytes', request: oneFile(noise), expect: { status: 415, code: 'unsupported_media_type' } },
  // ── the image itself ──
  {
    name: 'a truncated JPEG',
    request: oneFile(() => half(encodedImage('jpeg', 200, 150))),
    expect: { status: 422, code: 'invalid_image', pointer: '/file' },
  },
  {
    name: 'a truncated PNG',
    request: oneFile(() => half(encodedImage('png', 200, 150))),
    expect: { status: 422, code: 'invalid_image' },
  },
  {
    name: 'a truncated WebP',
    request: oneFile(() => half(encodedImage('webp', 200, 150))),
    expect: { status: 422, code: 'invalid_image' },
  },
  {
    name: 'a PNG signature and nothing else',
    request: oneFile(() => Buffer.from('89504e470d0a1a0a', 'hex')),
    expect: { status: 422, code: 'invalid_image' },
  },
  {
    name: 'a PNG header claiming 30000×30000',
    request: oneFile(() => pngWithHeader(30_000, 30_000, Buffer.alloc(64))),
    expect: { status: 422, code: 'invalid_image', pointer: '/file' },
  },
  {
    name: 'an image over a configured UPLOAD_MAX_PIXELS',
    env: { UPLOAD_MAX_PIXELS: '10000' },
    request: oneFile(() => encodedImage('png', 200, 51)),
    expect: { status: 422, code: 'invalid_image' },
  },
  // ── the request around the body ──
  {
    name: 'a JSON body',
    request: async () => ({ headers: { 'content-type': 'application/json' }, payload: '{"file":"aGVsbG8="}' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a text/plain body',
    request: async () => ({ headers: { 'content-type': 'text/plain' }, payload: 'hello' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a urlencoded form',
    request: async () => ({ headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'file=abc' }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'a raw PNG body (not multipart)',
    request: async () => ({ headers: { 'content-type': 'image/png' }, payload: await encodedImage('png', 8, 8) }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  {
    name: 'no body and no Content-Type',
    request: async () => ({ headers: {} }),
    expect: { status: 415, code: 'unsupported_media_type' },
  },
  // ── accepted, though a naive check would get them wrong ──
  {
    name: 'a PNG declared as image/jpeg',
    request: oneFile(() => encodedImage('png', 12, 12), { filename: 'photo.jpg', contentType: 'image/jpeg' }),
    expect: { accepted: 'image/png' },
  },
  {
    name: 'a WebP named .png with no declared type',
    request: oneFile(() => encodedImage('webp', 12, 12), { filename: 'x.png', contentType: '' }),
    expect: { accepted: 'image/webp' },
  },
  {
    name: 'a `file` part without a filename',
    request: async () =>
      multipartRequest([{ name: 'file', contentType: 'image/png', data: await encodedImage('png', 12, 12) }]),
    expect: { accepted: 'image/png' },
  },
  {
    name: 'a JPEG with GPS EXIF',
    request: oneFile(() => jpegWithGps(), { filename: 'holiday.jpg', contentType: 'image/jpeg' }),
    expect: { accepted: 'image/jpeg' },
  },
];

for (const c of cases) {
  const expectation = 'accepted' in c.expect ? `201 as ${c.expect.accepted}` : `${c.expect.status} ${c.expect.code}`;
  t.test(`${c.name} → ${expectation}`, async (t) => {
    // UPLOAD_MAX_BYTES and UPLOAD_MAX_PIXELS are read when an app is built.
    const ctx = c.env ? await buildTestApp(t, c.env) : shared();
    const { auth } = await ctx.newAccount();
    const blobsBefore = await ctx.storedBlobKeys();
    const request = await c.request();
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/api/v1/media',
      headers: { ...auth, ...request.headers },
      payload: request.payload,
    });

    if ('accepted' in c.expect) {
      t.equal(res.statusCode, 201, res.body);
      t.equal(res.json().data.content_type, c.expect.accepted);
    } else {
      t.equal(res.statusCode, c.expect.status, res.body);
      t.match(res.headers['content-type'], /^application\/problem\+json/);
      const problem = res.json();
      t.equal(problem.code, c.expect.code);
      t.equal(problem.status, c.expect.status);
      if (c.expect.pointer !== undefined) t.match(problem.errors, [{ pointer: c.expect.pointer, location: 'body' }]);
      t.strictSame(await ctx.storedBlobKeys(), blobsBefore, 'no blob was stored');
    }
    const tmp = join(ctx.dataDir, 'tmp');
    t.same(existsSync(tmp) ? await readdir(tmp) : [], [], 'no spooled file is left behind');
  });
}

t.test('there are at least 20 refused uploads above', async (t) => {
  t.ok(cases.filter((c) => !('accepted' in c.expect)).length >= 20);
});

t.test('a JPEG with GPS EXIF is stored without any EXIF', async (t) => {
  const ctx = shared();
  const { auth } = await ctx.newAccount();
  const located = await jpegWithGps();
  t.ok((await sharp(located).metadata()).exif, 'the fixture carries EXIF');
  const request = multipartRequest([filePart(located, { filename: 'holiday.jpg' })]);
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    headers: { ...auth, ...request.headers },
    payload: request.payload,
  });
  t.equal(res.statusCode, 201);
  const content = await ctx.app.inject({
    method: 'GET',
    url: `/api/v1/media/${res.json().data.media_id}/content`,
    headers: auth,
  });
  const stored = await sharp(content.rawPayload).metadata();
  t.equal(stored.format, 'jpeg');
  t.equal(stored.exif, undefined, 'no EXIF in the stored bytes');
  t.equal(stored.xmp, undefined);
  t.notOk(content.rawPayload.includes('GPS-test-owner'), 'no trace of the EXIF text anywhere in the bytes');
});

t.test('a refused upload in the middle of a body closes the connection', async (t) => {
  const ctx = shared();
  const { auth } = await ctx.newAccount();
  const request = multipartRequest([filePart(Buffer.alloc(MAX_BYTES + 1))]);
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/api/v1/media',
    headers: { ...auth, ...MULTIPART },
    payload: request.payload,
  });
  t.equal(res.statusCode, 413);
  t.equal(res.headers.connection, 'close');
});

function jpegWithGps(): Promise<Buffer> {
  return noisyImage(40, 30)
    .jpeg()
    .withExif({ IFD0: { Copyright: 'GPS-test-owner' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '51/1 30/1 0/1' } })
    .toBuffer();
}
