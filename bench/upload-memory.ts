/**
 * DESIGN 5: "10 concurrent uploads add < 150 MiB RSS". Starts the app on 127.0.0.1 (an ephemeral
 * port), makes one warm-up upload, then sends 10 uploads of a 10 MiB PNG at once over real HTTP
 * and reports how far the process's RSS rose above the warmed-up baseline.
 *
 *   npx tsx bench/upload-memory.ts              (UPLOAD_DECODE_CONCURRENCY etc. from the environment)
 *   node --expose-gc --import tsx bench/upload-memory.ts   (baseline taken after a full GC)
 *
 * The client runs in the same process but streams each body from a file in 64 KiB chunks, so what
 * it holds is negligible; the fixture is written to disk before the baseline is taken.
 */
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { incompressiblePng } from './lib/images.js';
import { listenOnLoopback, settle } from './lib/listening-app.js';
import { mib } from './lib/memory.js';
import { uploadFile } from './lib/upload-client.js';

const CONCURRENT_UPLOADS = 10;
const TARGET_BYTES = 10 * 1024 * 1024;
const BUDGET_MIB = 150;
const MiB = 1024 * 1024;

const dataDir = await mkdtemp(join(tmpdir(), 'imagegen-upload-bench-'));
try {
  const { config, port, key, close } = await listenOnLoopback(dataDir);

  const fixture = join(dataDir, 'fixture.png');
  await writeFile(fixture, await incompressiblePng(TARGET_BYTES));
  const fixtureBytes = (await stat(fixture)).size;

  const upload = () => uploadFile(port, key, fixture, fixtureBytes);
  const warmUp = await upload();
  if (warmUp !== 201) throw new Error(`warm-up upload failed with ${warmUp}`);
  await settle();
  const baseline = process.memoryUsage().rss;
  const baselineBuffers = process.memoryUsage().arrayBuffers;

  let peak = baseline;
  let peakBuffers = baselineBuffers;
  const sampler = setInterval(() => {
    const usage = process.memoryUsage();
    peak = Math.max(peak, usage.rss);
    peakBuffers = Math.max(peakBuffers, usage.arrayBuffers);
  }, 5);
  const started = performance.now();
  const statuses = await Promise.all(Array.from({ length: CONCURRENT_UPLOADS }, upload));
  const elapsedMs = performance.now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  await settle();
  const after = process.memoryUsage().rss;

  await close();

  const growthMiB = (peak - baseline) / MiB;
  const report = {
    uploads: CONCURRENT_UPLOADS,
    upload_bytes: fixtureBytes,
    decode_concurrency: config.UPLOAD_DECODE_CONCURRENCY,
    statuses: [...new Set(statuses)],
    elapsed_ms: Math.round(elapsedMs),
    rss_baseline_mib: mib(baseline),
    rss_peak_mib: mib(peak),
    rss_growth_mib: mib(peak - baseline),
    rss_after_mib: mib(after),
    // Node Buffers alone (the rest of the growth is native: libvips, zlib, malloc arenas).
    buffers_growth_mib: mib(peakBuffers - baselineBuffers),
    budget_mib: BUDGET_MIB,
    within_budget: growthMiB < BUDGET_MIB && statuses.every((s) => s === 201),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.exitCode = report.within_budget ? 0 : 1;
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
