import sharp from 'sharp';

/** A noisy image, so that encoders produce realistic files (and every call different bytes). */
export function noisyImage(width: number, height: number, channels: 3 | 4 = 3) {
  return sharp({ create: { width, height, channels, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 30 } } });
}

export type UploadFormat = 'png' | 'jpeg' | 'webp';

export const CONTENT_TYPE_OF: Record<UploadFormat, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

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
