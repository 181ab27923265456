/**
 * Local renderer timing (docs/design.md §5: 1K < 150 ms, 4K < 1.5 s on one core). Calls LocalRenderer
 * directly, best of N per size, and prints one JSON object. bench/run.ts runs it pinned to one CPU
 * (taskset) with libvips and the libuv pool limited to one thread; run alone:
 *
 *   UV_THREADPOOL_SIZE=1 taskset -c 0 npx tsx bench/renderer.ts
 */
import sharp from 'sharp';
import { PIXEL_SIZES } from '../schemas/pixel-sizes.js';
import { LocalRenderer } from '../src/generators/local-renderer.js';
import { smallPng } from './lib/images.js';
import { PROMPT } from './lib/requests.js';

sharp.concurrency(1);
const renderer = new LocalRenderer();

interface Case {
  name: string;
  ratio: '1:1' | '21:9';
  resolution: '1K' | '2K' | '4K';
  references: number;
  runs: number;
}

const quick = process.argv.includes('--quick');
const CASES: Case[] = [
  { name: '1K', ratio: '1:1', resolution: '1K', references: 0, runs: quick ? 3 : 7 },
  { name: '2K', ratio: '1:1', resolution: '2K', references: 0, runs: quick ? 2 : 5 },
  { name: '4K', ratio: '1:1', resolution: '4K', references: 0, runs: quick ? 2 : 3 },
  // The most pixels any request can ask for (17.0 Mpx).
  { name: '4K 21:9', ratio: '21:9', resolution: '4K', references: 0, runs: quick ? 2 : 3 },
  { name: '1K + 8 references', ratio: '1:1', resolution: '1K', references: 8, runs: quick ? 3 : 5 },
];

const references = await Promise.all(Array.from({ length: 8 }, (_, i) => smallPng(i)));
const results = [];
for (const c of CASES) {
  const [width, height] = PIXEL_SIZES[c.ratio][c.resolution];
  const timings: number[] = [];
  let bytes = 0;
  for (let run = 0; run < c.runs + 1; run++) {
    const started = performance.now();
    const [image] = await renderer.generate(
      // A different prompt each run: nothing can be cached between runs.
      {
        model: 'alpha-pro',
        prompt: `${PROMPT} #${run}`,
        aspectRatio: c.ratio,
        resolution: c.resolution,
        width,
        height,
        references: references.slice(0, c.references),
      },
      new AbortController().signal,
    );
    const elapsed = performance.now() - started;
    bytes = image.bytes.length;
    if (run > 0) timings.push(elapsed); // run 0 warms up (font cache, code paths)
  }
  timings.sort((a, b) => a - b);
  results.push({
    name: c.name,
    width,
    height,
    runs: c.runs,
    best_ms: round(timings[0]),
    median_ms: round(timings[Math.floor(timings.length / 2)]),
    png_bytes: bytes,
  });
}
process.stdout.write(`${JSON.stringify({ sharp_concurrency: sharp.concurrency(), results })}\n`);

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
