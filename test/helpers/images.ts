import { deflateSync } from 'node:zlib';
import sharp from 'sharp';

/** A noisy image, so that encoders produce realistic files (and every call different bytes). */
export function noisyImage(width: number, height: number, channels: 3 | 4 = 3) {
  return sharp({
    create: { width, height, channels, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 30 } },
  });
}

export type UploadFormat = 'png' | 'jpeg' | 'webp';

export const CONTENT_TYPE_OF: Record<UploadFormat, string> = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
};

export function encodedImage(format: UploadFormat, width: number, height: number): Promise<Buffer> {
  const image = noisyImage(width, height);
  switch (format) {
    case 'png':
      return image.png().toBuffer();
    case 'jpeg':
      return image.jpeg().toBuffer();
    case 'webp':
      return image.webp().toBuffer();
  }
}

/** A hand-made RGB PNG with any dimensions in its header and the given pixel data (a decoder bomb or a corrupt image). */
export function pngWithHeader(
  width: number,
  height: number,
  pixelData = Buffer.alloc(0),
  opts = { compress: true },
): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit, truecolour, deflate, no filter method, no interlace
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', opts.compress ? deflateSync(pixelData) : pixelData),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const typeAndData = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typeAndData));
  return Buffer.concat([length, typeAndData, crc]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
