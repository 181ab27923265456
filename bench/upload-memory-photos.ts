/**
 * Upload memory with real photos (decision 0012; docs/design.md §5's upload row): 10 concurrent uploads of a
 * camera-like 20 MiB JPEG, then 10 concurrent uploads of a 40-megapixel PNG, each burst against
 * the app in this process over real HTTP on loopback. For each burst it reports the RSS growth at
 * the peak over the warmed-up baseline (budget < 300 MiB) and the RSS a minute after the burst
 * (budget: within 20 % of the baseline).
 *
 *   npx tsx bench/upload-memory-photos.ts                  (about 3 minutes)
 *   node --expose-gc --import tsx bench/upload-memory-photos.ts   (baselines after a full GC)
 *   SETTLE_MS=60000 (default) sets the wait after each burst.
 *
 * The fixtures are written to disk before any baseline; the client streams them in 64 KiB chunks.
 */
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { execFile, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { join } from 'node:path';
import sharp from 'sharp';
import { listenOnLoopback, settle } from './lib/listening-app.js';
import { mib } from './lib/memory.js';
import { uploadFile } from './lib/upload-client.js';

const CONCURRENT_UPLOADS = 10;
const PEAK_BUDGET_MIB = 300;
const AFTER_BUDGET_FRACTION = 0.2;
const SETTLE_MS = Number(process.env.SETTLE_MS ?? 60_000);
const MAX_BYTES = 20 * 1024 * 1024;
const MiB = 1024 * 1024;

/**
 * A camera-like JPEG: 24 megapixels (6000×4000, a common sensor), smooth gradients under sensor
 * noise, 4:4:4 chroma and EXIF, at the highest quality that stays within the 20 MiB upload limit.
 */
async function cameraJpeg(): Promise<Buffer> {
  const width = 6000;
  const height = 4000;
  const noise = sharp({
    create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 40 } },
  });
  const raw = await noise.raw().toBuffer();
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      raw[i] = (raw[i] + (x * 255) / width) / 2;
      raw[i + 1] = (raw[i + 1] + (y * 255) / height) / 2;
    }
  }
  let best: Buffer | null = null;
  for (const quality of [100, 98, 96, 94, 92, 90, 85, 80]) {
    const jpeg = await sharp(raw, { raw: { width, height, channels: 3 } })
      .jpeg({ quality, chromaSubsampling: '4:4:4' })
      .withExif({ IFD0: { Make: 'Bench', Model: 'Camera', Software: 'imagegen bench' } })
      .toBuffer();
    if (jpeg.length <= MAX_BYTES) {
      best = jpeg;
      break;
    }
  }
  if (!best) throw new Error('no quality gives a JPEG within 20 MiB');
  return best;
}

/**
 * A 40-megapixel PNG (8000×5000): smooth gradients under the strongest noise that still compresses
 * to within the upload limit (a photo saved as PNG would exceed it).
 */
async function fortyMegapixelPng(): Promise<Buffer> {
  const width = 8000;
  const height = 5000;
  for (const amplitude of [16, 8, 4, 2, 0]) {
    const raw = Buffer.alloc(width * height * 3);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const i = (y * width + x) * 3;
        const grain = amplitude ? Math.floor(Math.random() * amplitude) : 0;
        raw[i] = ((x * 255) / width + grain) & 0xff;
        raw[i + 1] = ((y * 255) / height + grain) & 0xff;
        raw[i + 2] = (((x + y) * 255) / (width + height)) & 0xff;
      }
    }
    const png = await sharp(raw, { raw: { width, height, channels: 3 } })
      .png({ compressionLevel: 6 })
      .toBuffer();
    if (png.length <= MAX_BYTES) return png;
  }
  throw new Error('no 40 MP PNG within 20 MiB');
}

export interface BurstReport {
  fixture: string;
  upload_bytes: number;
  statuses: number[];
  elapsed_ms: number;
  rss_baseline_mib: number;
  rss_peak_mib: number;
  rss_growth_mib: number;
  rss_after_settle_mib: number;
  after_settle_vs_baseline: number;
  within_budget: boolean;
}

/** What this script prints (one JSON line), read by bench/run.ts for its report. */
export interface PhotoUploadReport {
  uploads_per_burst: number;
  allocator: { MALLOC_MMAP_THRESHOLD_: string; MALLOC_ARENA_MAX: string };
  decode_concurrency: number;
  settle_ms: number;
  budget: { peak_growth_mib: number; after_settle_vs_baseline_at_most: number };
  bursts: BurstReport[];
  within_budget: boolean;
}

async function burst(
  name: string,
  path: string,
  upload: (path: string, bytes: number) => Promise<number>,
): Promise<BurstReport> {
  const bytes = (await stat(path)).size;
  await settle();
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const started = performance.now();
  const statuses = await Promise.all(Array.from({ length: CONCURRENT_UPLOADS }, () => upload(path, bytes)));
  const elapsedMs = performance.now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  await settle();
  const after = process.memoryUsage().rss;
  const growth = peak - baseline;
  const afterRatio = after / baseline;
  return {
    fixture: name,
    upload_bytes: bytes,
    statuses: [...new Set(statuses)],
    elapsed_ms: Math.round(elapsedMs),
    rss_baseline_mib: mib(baseline),
    rss_peak_mib: mib(peak),
    rss_growth_mib: mib(growth),
    rss_after_settle_mib: mib(after),
    after_settle_vs_baseline: Math.round(afterRatio * 100) / 100,
    within_budget:
      statuses.every((s) => s === 201) && growth < PEAK_BUDGET_MIB * MiB && afterRatio <= 1 + AFTER_BUDGET_FRACTION,
  };
}

/** `--write-fixtures DIR`: only writes the two fixtures (the bench runs itself so, to keep their memory out of its own). */
const fixturesArg = process.argv.indexOf('--write-fixtures');
if (fixturesArg >= 0) {
  const dir = process.argv[fixturesArg + 1];
  await writeFile(join(dir, 'camera.jpg'), await cameraJpeg());
  await writeFile(join(dir, 'forty-megapixels.png'), await fortyMegapixelPng());
  process.exit(0);
}

/**
 * glibc's malloc raises its mmap threshold as large blocks are freed, after which image-sized
 * buffers come from heap arenas that are never given back: RSS stays at the peak. The settings of
 * `npm start` (docs/capacity.md, "Memory") keep large blocks mmapped, so freeing them returns them. The bench
 * measures a process started with them: without them in its environment, it runs itself again with
 * them (ALLOCATOR=glibc-default measures glibc's defaults instead).
 */
const ALLOCATOR_ENV = { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '2' };
if (process.env.MALLOC_MMAP_THRESHOLD_ === undefined && process.env.ALLOCATOR !== 'glibc-default') {
  const child = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, ...ALLOCATOR_ENV },
  });
  process.exit(child.status ?? 1);
}

const dataDir = await mkdtemp(join(tmpdir(), 'imagegen-photo-bench-'));
try {
  const jpegPath = join(dataDir, 'camera.jpg');
  const pngPath = join(dataDir, 'forty-megapixels.png');
  await promisify(execFile)(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), '--write-fixtures', dataDir],
    { maxBuffer: 1 << 20 },
  );

  const { config, port, key, close } = await listenOnLoopback(dataDir);
  const upload = (path: string, bytes: number) => uploadFile(port, key, path, bytes);
  // Warm-up: as many of each at once as are decoded at once, so that the baselines include what the
  // process sets up once for that many (codecs, libvips' threads and their buffers, V8's heap).
  for (const path of [jpegPath, pngPath]) {
    const bytes = (await stat(path)).size;
    const statuses = await Promise.all(
      Array.from({ length: config.UPLOAD_DECODE_CONCURRENCY }, () => upload(path, bytes)),
    );
    if (statuses.some((s) => s !== 201)) throw new Error(`warm-up uploads of ${path} answered ${statuses.join(', ')}`);
  }
  const bursts = [
    await burst('camera-like JPEG, 6000×4000', jpegPath, upload),
    await burst('PNG, 8000×5000 (40 MP)', pngPath, upload),
  ];
  await close();
  const report: PhotoUploadReport = {
    uploads_per_burst: CONCURRENT_UPLOADS,
    allocator: {
      MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? 'glibc default',
      MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? 'glibc default',
    },
    decode_concurrency: config.UPLOAD_DECODE_CONCURRENCY,
    settle_ms: SETTLE_MS,
    budget: { peak_growth_mib: PEAK_BUDGET_MIB, after_settle_vs_baseline_at_most: 1 + AFTER_BUDGET_FRACTION },
    bursts,
    within_budget: bursts.every((b) => b.within_budget),
  };
  // One line: bench/run.ts reads the last line of its output; the verdict is in the report.
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
