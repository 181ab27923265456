import { createHash, randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import sharp from 'sharp';
import t, { type Test } from 'tap';
import { normalizeUpload, sniffImageType, type UploadRejectedError } from '../../src/images/normalize-upload.js';
import { pngWithHeader } from '../helpers/images.js';

const MAX_PIXELS = 40_000_000;

/** A noisy image, so encoders produce realistic, non-trivial files. */
function pictureOf(width: number, height: number, channels: 3 | 4 = 3) {
  return sharp({
    create: { width, height, channels, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 30 } },
  });
}

async function uploadedFile(t: Test, bytes: Buffer | string): Promise<string> {
  const path = join(t.testdir(), 'upload');
  await writeFile(path, bytes);
  return path;
}

const rejectedAs = (code: UploadRejectedError['code']) => ({ name: 'UploadRejectedError', code });

t.test('sniffImageType recognises the three formats by their magic bytes only', async (t) => {
  t.equal(sniffImageType(Buffer.from('89504e470d0a1a0a0000', 'hex')), 'image/png');
  t.equal(sniffImageType(Buffer.from('ffd8ffe0', 'hex')), 'image/jpeg');
  t.equal(sniffImageType(Buffer.from('RIFF\x10\x00\x00\x00WEBPVP8 ', 'latin1')), 'image/webp');
  t.equal(sniffImageType(Buffer.from('RIFF\x10\x00\x00\x00WAVEfmt ', 'latin1')), null);
  t.equal(sniffImageType(Buffer.from('GIF89a')), null);
  t.equal(sniffImageType(Buffer.from('89504e47', 'hex')), null, 'a cut signature is not a PNG');
  t.equal(sniffImageType(Buffer.alloc(0)), null);
});

t.test('a PNG is accepted as PNG with its dimensions, size and hash', async (t) => {
  const path = await uploadedFile(t, await pictureOf(64, 48, 4).png().toBuffer());
  const image = await normalizeUpload(path, { maxPixels: MAX_PIXELS });
  t.equal(image.contentType, 'image/png');
  t.match(image, { width: 64, height: 48, sizeBytes: image.bytes.length });
  t.equal(image.sha256, createHash('sha256').update(image.bytes).digest('hex'));
  t.match(await sharp(image.bytes).metadata(), { format: 'png', width: 64, height: 48, hasAlpha: true });
});

t.test('a JPEG is accepted as JPEG with its dimensions', async (t) => {
  const path = await uploadedFile(t, await pictureOf(64, 48).jpeg().toBuffer());
  const image = await normalizeUpload(path, { maxPixels: MAX_PIXELS });
  t.match(image, { contentType: 'image/jpeg', width: 64, height: 48 });
  t.equal((await sharp(image.bytes).metadata()).format, 'jpeg');
});

t.test('a WebP is accepted as WebP with its dimensions', async (t) => {
  const path = await uploadedFile(t, await pictureOf(64, 48).webp().toBuffer());
  const image = await normalizeUpload(path, { maxPixels: MAX_PIXELS });
  t.match(image, { contentType: 'image/webp', width: 64, height: 48 });
  t.equal((await sharp(image.bytes).metadata()).format, 'webp');
});

t.test('an image of exactly maxPixels is accepted', async (t) => {
  const path = await uploadedFile(t, await pictureOf(100, 50).png().toBuffer());
  t.match(await normalizeUpload(path, { maxPixels: 5000 }), { width: 100, height: 50 });
});

t.test('EXIF orientation is applied and the EXIF removed', async (t) => {
  const rotatedOnDisplay = await pictureOf(60, 20).jpeg().withMetadata({ orientation: 6 }).toBuffer();
  t.match(await sharp(rotatedOnDisplay).metadata(), { width: 60, height: 20, orientation: 6 }, 'fixture');
  const image = await normalizeUpload(await uploadedFile(t, rotatedOnDisplay), { maxPixels: MAX_PIXELS });
  t.match(image, { width: 20, height: 60 });
  const stored = await sharp(image.bytes).metadata();
  t.match(stored, { width: 20, height: 60 });
  t.equal(stored.exif, undefined);
  t.equal(stored.orientation, undefined);
});

t.test('GPS EXIF is removed', async (t) => {
  const located = await pictureOf(40, 30)
    .jpeg()
    .withExif({ IFD0: { Copyright: 'someone' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '51/1 30/1 0/1' } })
    .toBuffer();
  t.ok(hasGpsIfd((await sharp(located).metadata()).exif), 'fixture has GPS EXIF');
  const image = await normalizeUpload(await uploadedFile(t, located), { maxPixels: MAX_PIXELS });
  t.equal((await sharp(image.bytes).metadata()).exif, undefined);
  t.notOk(image.bytes.includes('someone'), 'no EXIF text left anywhere in the bytes');
});

t.test('XMP and ICC metadata are removed', async (t) => {
  const tagged = await pictureOf(40, 30)
    .webp()
    .withXmp(
      '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/></x:xmpmeta>',
    )
    .withIccProfile('p3')
    .toBuffer();
  t.match(await sharp(tagged).metadata(), { xmp: Buffer, icc: Buffer }, 'fixture has XMP and ICC');
  const image = await normalizeUpload(await uploadedFile(t, tagged), { maxPixels: MAX_PIXELS });
  const stored = await sharp(image.bytes).metadata();
  t.equal(stored.xmp, undefined);
  t.equal(stored.icc, undefined);
  t.equal(stored.space, 'srgb');
});

t.test('a PNG header claiming 30000×30000 is rejected from the header alone', async (t) => {
  const path = await uploadedFile(t, pngWithHeader(30_000, 30_000, Buffer.alloc(64)));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), {
    ...rejectedAs('invalid_image'),
    // The message names the claimed size, so this was the header check, not a failed decode.
    message: /30000×30000/,
  });
});

t.test('an image over a small maxPixels is rejected', async (t) => {
  const path = await uploadedFile(t, await pictureOf(100, 51).png().toBuffer());
  await t.rejects(normalizeUpload(path, { maxPixels: 5000 }), rejectedAs('invalid_image'));
});

t.test('a JPEG cut in half is rejected', async (t) => {
  const jpeg = await pictureOf(200, 150).jpeg().toBuffer();
  const path = await uploadedFile(t, jpeg.subarray(0, jpeg.length >> 1));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

// libjpeg notices a missing end marker only when it reads past the last scan, which depends on
// the entropy-coded bytes (about 3 % of random images decode completely without it and are then
// accepted: their pixels are all there). A fixed image keeps this case deterministic.
t.test('a JPEG missing only its end marker is rejected when its decoder runs into the cut', async (t) => {
  const jpeg = await sharp({ create: { width: 200, height: 150, channels: 3, background: '#3366aa' } })
    .jpeg()
    .toBuffer();
  const path = await uploadedFile(t, jpeg.subarray(0, jpeg.length - 2));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a PNG cut in half is rejected', async (t) => {
  const png = await pictureOf(200, 150).png().toBuffer();
  const path = await uploadedFile(t, png.subarray(0, png.length >> 1));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a PNG with garbage after its header is rejected', async (t) => {
  const path = await uploadedFile(t, Buffer.concat([pngWithHeader(64, 64).subarray(0, 33), randomBytes(4096)]));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a PNG whose compressed pixel data is garbage is rejected', async (t) => {
  const path = await uploadedFile(t, pngWithHeader(64, 64, randomBytes(4096), { compress: false }));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a PNG with less pixel data than its header promises is rejected', async (t) => {
  const path = await uploadedFile(t, pngWithHeader(64, 64, Buffer.alloc(10)));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a WebP cut in half is rejected', async (t) => {
  const webp = await pictureOf(200, 150).webp().toBuffer();
  const path = await uploadedFile(t, webp.subarray(0, webp.length >> 1));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('invalid_image'));
});

t.test('a GIF is an unsupported media type', async (t) => {
  const path = await uploadedFile(t, await pictureOf(16, 16).gif().toBuffer());
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('unsupported_media_type'));
});

t.test('an SVG is an unsupported media type', async (t) => {
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>';
  const path = await uploadedFile(t, svg);
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('unsupported_media_type'));
});

t.test('plain text is an unsupported media type', async (t) => {
  const path = await uploadedFile(t, 'hello, this is not an image\n');
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('unsupported_media_type'));
});

t.test('random bytes are an unsupported media type', async (t) => {
  // A leading zero byte rules out the (unlikely) chance of random magic bytes.
  const path = await uploadedFile(t, Buffer.concat([Buffer.from([0]), randomBytes(4095)]));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('unsupported_media_type'));
});

t.test('an empty file is an unsupported media type', async (t) => {
  const path = await uploadedFile(t, Buffer.alloc(0));
  await t.rejects(normalizeUpload(path, { maxPixels: MAX_PIXELS }), rejectedAs('unsupported_media_type'));
});

/** The GPS IFD pointer tag (0x8825), in either byte order; libvips writes little-endian EXIF. */
function hasGpsIfd(exif: Buffer | undefined): boolean {
  return !!exif && (exif.includes(Buffer.from([0x25, 0x88])) || exif.includes(Buffer.from([0x88, 0x25])));
}

/**
 * A hand-made RGB PNG: signature, IHDR with any dimensions, one IDAT holding pixelData
 * (zlib-compressed unless told otherwise), IEND. The pixel data need not match the size.
 */
