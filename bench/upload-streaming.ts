/**
 * docs/design.md §5: "a 20 MiB image streams without buffering whole request bodies twice". Builds the app
 * in this process on 127.0.0.1 (so that it can force collections), warms it with one small upload,
 * then sends one at a time, each body streamed from disk by a client that holds a chunk at a time:
 *
 * - a body of the largest size UPLOAD_MAX_BYTES admits that is not an image: received whole (the
 *   part goes to a temporary file as it arrives), then refused with 415 before any image work;
 * - a PNG of that size (random pixels), decoded, re-encoded and stored (201).
 *
 * For each, how far Node's live Buffers (`process.memoryUsage().arrayBuffers`) and RSS rose above
 * where they stood, with a full GC every 10 ms while the upload runs: what the process holds, not
 * chunks already written and waiting for a collection (without the GCs they pile up until V8's
 * external-memory trigger, about as much as the body, and say nothing about buffering). Prints one
 * JSON object; bench/run.ts puts it in the budget table.
 *
 *   node --expose-gc --import tsx bench/upload-streaming.ts
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { incompressiblePng, smallPng } from './lib/images.js';
import { listenOnLoopback, settle } from './lib/listening-app.js';
import { mib } from './lib/memory.js';
import { uploadFile } from './lib/upload-client.js';

const gc = (globalThis as { gc?: () => void }).gc;
// Often enough that a copy of a 20 MiB body, which takes far longer than this to make and to use,
// is live at some collection; every 2 ms (as first written) left the process doing little but
// collecting, and each upload took 35–45 s on a loaded 2-core machine.
const GC_EVERY_MS = 10;
if (!gc) throw new Error('run with node --expose-gc');

const dataDir = await mkdtemp(join(tmpdir(), 'imagegen-upload-streaming-'));
try {
  const { config, port, key, close } = await listenOnLoopback(dataDir);

  // The largest file the limit admits, less room for a PNG that comes out a little over its target.
  const largest = config.UPLOAD_MAX_BYTES - 64 * 1024;
  const fixture = async (name: string, bytes: Buffer) => {
    const path = join(dataDir, name);
    await writeFile(path, bytes);
    return { path, size: bytes.length };
  };
  const warmUp = await fixture('warm-up.png', await smallPng(1));
  const notAnImage = await fixture(
    'not-an-image.bin',
    Buffer.concat([Buffer.from('not an image: '), randomBytes(largest - 14)]),
  );
  const png = await fixture('large.png', await incompressiblePng(largest));

  const measure = async (file: { path: string; size: number }) => {
    await settle();
    const before = process.memoryUsage();
    let peakRss = before.rss;
    let peakBuffers = before.arrayBuffers;
    const sampler = setInterval(() => {
      gc();
      const usage = process.memoryUsage();
      peakRss = Math.max(peakRss, usage.rss);
      peakBuffers = Math.max(peakBuffers, usage.arrayBuffers);
    }, GC_EVERY_MS);
    const status = await uploadFile(port, key, file.path, file.size);
    clearInterval(sampler);
    return {
      bytes: file.size,
      status,
      buffersGrowthMiB: mib(peakBuffers - before.arrayBuffers),
      rssGrowthMiB: mib(peakRss - before.rss),
    };
  };

  if ((await uploadFile(port, key, warmUp.path, warmUp.size)) !== 201) throw new Error('warm-up upload failed');
  const received = await measure(notAnImage);
  const stored = await measure(png);
  await close();
  process.stdout.write(`${JSON.stringify({ received, stored })}\n`);
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
