import { Readable } from 'node:stream';
import sharp from 'sharp';
import t from 'tap';
import { PREVIEW_MAX_BYTES, previewOf } from '../../src/images/preview.js';
import { noisyImage } from '../helpers/images.js';

const streamOf = (bytes: Buffer) => Readable.from([bytes]);

t.test('a large image is fitted into 1024×1024 as a JPEG under the byte bound', async (t) => {
  const png = await noisyImage(3000, 1500).png().toBuffer();
  const preview = await previewOf(streamOf(png));
  t.same([preview.width, preview.height], [1024, 512]);
  t.equal(preview.contentType, 'image/jpeg');
  t.ok(preview.bytes.length <= PREVIEW_MAX_BYTES);
  const meta = await sharp(preview.bytes).metadata();
  t.same([meta.format, meta.width, meta.height], ['jpeg', 1024, 512], 'the bytes are what it says');
});

t.test('a small image is not enlarged; transparency is flattened on white', async (t) => {
  const transparent = await sharp({
    create: { width: 300, height: 200, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } },
  })
    .png()
    .toBuffer();
  const preview = await previewOf(streamOf(transparent));
  t.same([preview.width, preview.height], [300, 200]);
  const { data } = await sharp(preview.bytes).raw().toBuffer({ resolveWithObject: true });
  t.ok(data[0] > 245 && data[1] > 245 && data[2] > 245, 'white, not black');
});

t.test('bytes that are no image reject', async (t) => {
  await t.rejects(previewOf(streamOf(Buffer.from('not an image at all'))));
});
