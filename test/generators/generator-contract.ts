import sharp from 'sharp';
import type { Test } from 'tap';
import type { GenerationInput, ImageGenerator } from '../../src/generators/port.js';

const textToImage: GenerationInput = {
  model: 'alpha-pro',
  prompt: 'a lighthouse on a cliff at dusk',
  aspectRatio: '2:3',
  resolution: '1K',
  width: 848,
  height: 1264,
  references: [],
};

function isAbortRejection(error: unknown, reason: unknown): boolean {
  return error === reason || (error instanceof Error && error.name === 'AbortError');
}

/** Behaviour every ImageGenerator adapter must share; call it from each adapter's test file. */
export function imageGeneratorContract(t: Test, makeGenerator: () => ImageGenerator): void {
  t.test('text-to-image returns PNGs of exactly the requested size', async (t) => {
    const images = await makeGenerator().generate(textToImage, new AbortController().signal);
    t.ok(images.length >= 1, 'at least one image');
    for (const image of images) {
      const metadata = await sharp(image.bytes).metadata();
      t.equal(metadata.format, 'png');
      t.equal(image.contentType, 'image/png');
      t.same([metadata.width, metadata.height], [textToImage.width, textToImage.height]);
      t.same([image.width, image.height], [textToImage.width, textToImage.height]);
    }
  });

  t.test('image-to-image returns PNGs of exactly the requested size', async (t) => {
    const reference = await sharp({ create: { width: 96, height: 64, channels: 3, background: '#808000' } })
      .jpeg()
      .toBuffer();
    const input = { ...textToImage, aspectRatio: '21:9', width: 1584, height: 672, references: [reference] };
    const images = await makeGenerator().generate(input, new AbortController().signal);
    t.ok(images.length >= 1, 'at least one image');
    for (const image of images) {
      const metadata = await sharp(image.bytes).metadata();
      t.same([metadata.width, metadata.height, image.width, image.height], [1584, 672, 1584, 672]);
    }
  });

  t.test('a signal aborted before the call rejects', async (t) => {
    const controller = new AbortController();
    const reason = new Error('cancelled before start');
    controller.abort(reason);
    const error = await makeGenerator()
      .generate(textToImage, controller.signal)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    t.ok(isAbortRejection(error, reason), 'rejects with the abort reason or an AbortError');
  });

  t.test('aborting while generating rejects', async (t) => {
    const controller = new AbortController();
    const reason = new Error('cancelled mid-flight');
    const generation = makeGenerator().generate(textToImage, controller.signal);
    controller.abort(reason);
    const error = await generation.then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(isAbortRejection(error, reason), 'rejects with the abort reason or an AbortError');
  });
}
