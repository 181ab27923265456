import sharp from 'sharp';
import { writeFileSync } from 'node:fs';
import { normalizeUpload } from '../src/images/normalize-upload.ts';
let ok = 0, rej = 0;
for (let i = 0; i < 200; i++) {
  const jpeg = await sharp({ create: { width: 200, height: 150, channels: 3, background: '#3366aa', noise: { type: 'gaussian', mean: 128, sigma: 30 } } }).jpeg().toBuffer();
  const p = `/tmp/eoi-${process.pid}-${i}.jpg`;
  writeFileSync(p, jpeg.subarray(0, jpeg.length - 2));
  try { await normalizeUpload(p, { maxPixels: 40e6 }); ok++; } catch { rej++; }
}
console.log({ ok, rej });
