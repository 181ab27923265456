/**
 * Decision 0011: peak RSS of one Gemini task with 10 references of ~20 MiB each, read from a file blob
 * store and sent to a loopback Gemini. Two ways, each in a fresh process (peak RSS is per process):
 * - `all-at-once`: every reference read, then the generator prepares them (the worker before);
 * - `one-at-a-time`: loadTaskReferences, as the worker does now (each read and prepared in turn).
 * Each under glibc's default allocator settings and under `npm start`'s. Run alone, not under load: `scripts/with-node.sh 24 npx tsx bench/reference-prep-memory.ts`.
 * The references are noise PNGs (noise does not compress: the worst case for the bytes limit).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { FsBlobStore } from '../src/blobs/fs-blob-store.js';
import { GeminiGenerator } from '../src/generators/gemini-generator.js';
import { loadTaskReferences } from '../src/worker/task-references.js';

const COUNT = 10;
const EDGE = 2600; // 2600² × 3 bytes of noise ≈ 19.3 MiB of PNG
const MODES = ['all-at-once', 'one-at-a-time'] as const;
type Mode = (typeof MODES)[number];

/** glibc's own defaults, and what `npm start` sets (docs/capacity.md, "Memory"; decision 0012). */
const ALLOCATORS: Record<string, Record<string, string>> = {
  'glibc-default': {},
  'npm-start': { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '2' },
};

const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
const keyOf = (i: number) => `references/ref-${i}.png`;

/** The parent: writes the references once, then measures each mode in a process of its own. */
async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'reference-prep-memory-'));
  try {
    const png = await sharp(randomBytes(EDGE * EDGE * 3), { raw: { width: EDGE, height: EDGE, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toBuffer();
    const blobs = new FsBlobStore(dir);
    for (let i = 0; i < COUNT; i++) await blobs.put(keyOf(i), png);
    console.log(`${COUNT} references of ${mib(png.length)} MiB`);
    // The loopback Gemini runs here, so that the request it parses is not counted in the child's RSS.
    const image = (
      await sharp({ create: { width: 1024, height: 1024, channels: 3, background: '#336699' } })
        .png()
        .toBuffer()
    ).toString('base64');
    let largestPart = 0;
    let requestBytes = 0;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        requestBytes = body.length;
        const parts = JSON.parse(body.toString()).contents[0].parts.slice(1) as { inlineData: { data: string } }[];
        largestPart = Math.max(...parts.map((p) => Buffer.from(p.inlineData.data, 'base64').length));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            candidates: [
              { content: { parts: [{ inlineData: { mimeType: 'image/png', data: image } }] }, finishReason: 'STOP' },
            ],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const [allocator, allocatorEnv] of Object.entries(ALLOCATORS))
      for (const mode of MODES) {
        const child = spawn(
          process.execPath,
          [...process.execArgv, fileURLToPath(import.meta.url), mode, dir, baseUrl],
          {
            stdio: ['ignore', 'pipe', 'inherit'],
            env: { ...process.env, ...allocatorEnv },
          },
        );
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        const [status] = (await once(child, 'close')) as [number | null];
        if (status !== 0) throw new Error(`${mode} failed (${status})`);
        const result = JSON.parse(out.trim()) as object;
        console.log(
          JSON.stringify({ allocator, ...result, largest_part_bytes: largestPart, request_mib: mib(requestBytes) }),
        );
      }
    server.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A child: one task's references through `mode`, then one call to the parent's Gemini; prints its peak RSS. */
async function measure(mode: Mode, dir: string, baseUrl: string): Promise<void> {
  const generator = new GeminiGenerator({
    apiKey: 'k',
    baseUrl,
    model: 'gemini-3-pro-image-preview',
    maxConcurrency: 1,
  });
  const blobs = new FsBlobStore(dir);
  const keys = new Map(Array.from({ length: COUNT }, (_, i) => [`media-${i}`, keyOf(i)]));
  const task = { accountId: 'acct', imageReference: [...keys.keys()] };
  const signal = new AbortController().signal;
  const before = process.memoryUsage().rss;
  const started = performance.now();
  const references =
    mode === 'all-at-once'
      ? await Promise.all([...keys.values()].map(async (key) => (await blobs.getBuffer(key))!))
      : await loadTaskReferences({ store: { mediaBlobKeys: async () => keys }, blobs }, task, generator, signal);
  await generator.generate(
    { model: 'alpha-pro', prompt: 'p', aspectRatio: '1:1', resolution: '1K', width: 1024, height: 1024, references },
    signal,
  );
  const seconds = (performance.now() - started) / 1000;
  console.log(
    JSON.stringify({
      mode,
      rss_before_mib: mib(before),
      peak_rss_mib: mib(process.resourceUsage().maxRSS * 1024),
      seconds: seconds.toFixed(1),
    }),
  );
}

const [mode, dir, baseUrl] = process.argv.slice(2);
if (mode && dir && baseUrl) await measure(mode as Mode, dir, baseUrl);
else await main();
