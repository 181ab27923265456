/**
 * Bytes of a 4K result in each output format (issue 41: "a 4K WebP result is at most a fifth of the
 * PNG's bytes"): the local renderer's 4K images of two prompts at two ratios, encoded as the worker
 * stores them (png, and jpeg and webp at the default output_compression), and the time each
 * encode takes. Prints one JSON object; bench/run.ts writes it into BENCHMARKS.md (--only output-formats).
 *
 *   UV_THREADPOOL_SIZE=1 taskset -c 0 npx tsx bench/output-formats.ts
 */
import sharp from 'sharp';
import { DEFAULT_OUTPUT_COMPRESSION, OUTPUT_FORMATS } from '../schemas/output-format.js';
import { PIXEL_SIZES } from '../schemas/pixel-sizes.js';
import { LocalRenderer } from '../src/generators/local-renderer.js';
import { PROMPT } from './lib/requests.js';

sharp.concurrency(1);
const renderer = new LocalRenderer();

const CASES = [
  { ratio: '1:1', prompt: PROMPT },
  { ratio: '16:9', prompt: 'A busy night market in the rain, neon signs reflected in puddles, crowds with umbrellas' },
] as const;

const results = [];
for (const c of CASES) {
  const [width, height] = PIXEL_SIZES[c.ratio]['4K'];
  const row: Record<string, number | string> = { name: `4K ${c.ratio}`, width, height, prompt: c.prompt };
  for (const format of OUTPUT_FORMATS) {
    const input = {
      model: 'alpha-pro',
      prompt: c.prompt,
      aspectRatio: c.ratio,
      resolution: '4K',
      width,
      height,
      references: [],
      outputFormat: format,
    };
    // One warm-up render, then the measured one: the image is the same, only the time differs.
    await renderer.generate(input, new AbortController().signal);
    const started = performance.now();
    const [image] = await renderer.generate(input, new AbortController().signal);
    row[`${format}_ms`] = Math.round(performance.now() - started);
    row[`${format}_bytes`] = image.bytes.length;
    const metadata = await sharp(image.bytes).metadata();
    if (metadata.format !== format || metadata.width !== width || metadata.height !== height)
      throw new Error(`${format}: got ${metadata.format} ${metadata.width}x${metadata.height}`);
  }
  results.push(row);
}
process.stdout.write(`${JSON.stringify({ compression: DEFAULT_OUTPUT_COMPRESSION, results })}\n`);
