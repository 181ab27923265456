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
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { FsBlobStore } from '../src/blobs/fs-blob-store.js';
import { loadConfig } from '../src/config.js';
import { buildApp } from '../src/http/app.js';
import { createAccountWithKey } from '../src/services/api-keys.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

const CONCURRENT_UPLOADS = 10;
const TARGET_BYTES = 10 * 1024 * 1024;
const BUDGET_MIB = 150;
const MiB = 1024 * 1024;

const dataDir = await mkdtemp(join(tmpdir(), 'imagegen-upload-bench-'));
try {
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent', WORKER_CONCURRENCY: '0', HOST: '127.0.0.1', PORT: '0' });
  const store = new SqliteStore(join(dataDir, 'imagegen.sqlite'));
  await store.migrate();
  const app = await buildApp({ config, store, blobs: new FsBlobStore(join(dataDir, 'blobs')), mediaSigningSecret: randomBytes(32).toString('hex'), logger: false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const { key } = await createAccountWithKey(store, { name: 'bench', tokens: 0, now: new Date() });

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

  await app.close();
  await store.close();

  const growthMiB = (peak - baseline) / MiB;
  const report = {
    uploads: CONCURRENT_UPLOADS,
    upload_bytes: fixtureBytes,
    decode_concurrency: config.UPLOAD_DECODE_CONCURRENCY,
    statuses: [...new Set(statuses)],
    elapsed_ms: Math.round(elapsedMs),
    rss_baseline_mib: round(baseline / MiB),
    rss_peak_mib: round(peak / MiB),
    rss_growth_mib: round(growthMiB),
    rss_after_mib: round(after / MiB),
    // Node Buffers alone (the rest of the growth is native: libvips, zlib, malloc arenas).
    buffers_growth_mib: round((peakBuffers - baselineBuffers) / MiB),
    budget_mib: BUDGET_MIB,
    within_budget: growthMiB < BUDGET_MIB && statuses.every((s) => s === 201),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.exitCode = report.within_budget ? 0 : 1;
} finally {
  await rm(dataDir, { recursive: true, force: true });
}

/** Random pixels do not compress, so the PNG is about as large as its raw pixels (a little over). */
async function incompressiblePng(targetBytes: number): Promise<Buffer> {
  const encode = (side: number) =>
    sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();
  const first = Math.floor(Math.sqrt(targetBytes / 3));
  const png = await encode(first);
  return png.length <= targetBytes ? png : encode(Math.floor(first * Math.sqrt(targetBytes / png.length)));
}

/** One multipart upload whose body is streamed from disk (the client holds a chunk at a time). */
function uploadFile(port: number, key: string, path: string, size: number): Promise<number> {
  const boundary = `----bench${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.png"\r\nContent-Type: image/png\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/v1/media',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': head.length + size + tail.length,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.write(head);
    const file = createReadStream(path, { highWaterMark: 64 * 1024 });
    file.on('error', reject);
    file.on('end', () => req.end(tail));
    file.pipe(req, { end: false });
  });
}

async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 300));
  gc?.();
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
