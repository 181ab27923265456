import { randomBytes } from 'node:crypto';
import sharp from 'sharp';

/** Random pixels do not compress, so the PNG is about as large as its raw pixels (a little over). */
export async function incompressiblePng(targetBytes: number): Promise<Buffer> {
  const encode = (side: number) =>
    sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } })
      .png({ compressionLevel: 1 })
      .toBuffer();
  const first = Math.floor(Math.sqrt(targetBytes / 3));
  const png = await encode(first);
  return png.length <= targetBytes ? png : encode(Math.floor(first * Math.sqrt(targetBytes / png.length)));
}

/** A small reference image for image-to-image (a few KiB). */
export function smallPng(seed: number): Promise<Buffer> {
  const hue = (seed * 47) % 255;
  return sharp({ create: { width: 96, height: 64, channels: 3, background: { r: hue, g: 255 - hue, b: 128 } } })
    .png()
    .toBuffer();
}

/**
 * What goes around a file to make a multipart/form-data body with one part named `file`: the bytes
 * before it, the bytes after it, and the body's content type (for a client that streams the file).
 */
export function multipartEnvelope(
  filename = 'bench.png',
  contentType = 'image/png',
): { head: Buffer; tail: Buffer; contentType: string } {
  const boundary = `----bench${randomBytes(8).toString('hex')}`;
  return {
    head: Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${contentType}\r\n\r\n`,
    ),
    tail: Buffer.from(`\r\n--${boundary}--\r\n`),
    contentType: `multipart/form-data; boundary=${boundary}`,
  };
}

/** A complete multipart/form-data body with one part named `file`, and its content type. */
export function multipartBody(
  file: Buffer,
  filename?: string,
  contentType?: string,
): { body: Buffer; contentType: string } {
  const envelope = multipartEnvelope(filename, contentType);
  return { body: Buffer.concat([envelope.head, file, envelope.tail]), contentType: envelope.contentType };
}
