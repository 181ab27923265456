/**
 * Decision 0011: peak RSS of one Gemini call with 10 references of ~20 MiB each, prepared for the
 * provider's per-image limit. Run alone: `scripts/with-node.sh 24 npx tsx bench/reference-prep-memory.ts`.
 * The references are noise PNGs (noise does not compress: the worst case for the bytes limit).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { GeminiGenerator } from '../src/generators/gemini-generator.js';

const COUNT = 10;
const EDGE = 2600; // 2600² × 3 bytes of noise ≈ 19.3 MiB of PNG

async function main(): Promise<void> {
  const png = await sharp(randomBytes(EDGE * EDGE * 3), { raw: { width: EDGE, height: EDGE, channels: 3 } })
    .png({ compressionLevel: 0 })
    .toBuffer();
  // Ten distinct buffers, as ten stored uploads would be.
  const references = Array.from({ length: COUNT }, () => Buffer.from(png));
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
  const before = process.memoryUsage().rss;
  const generator = new GeminiGenerator({
    apiKey: 'k',
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    model: 'gemini-3-pro-image-preview',
    maxConcurrency: 1,
  });
  const started = performance.now();
  await generator.generate(
    { model: 'alpha-pro', prompt: 'p', aspectRatio: '1:1', resolution: '1K', width: 1024, height: 1024, references },
    new AbortController().signal,
  );
  const seconds = (performance.now() - started) / 1000;
  server.close();
  const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
  console.log(
    JSON.stringify({
      references: COUNT,
      reference_mib: mib(png.length),
      rss_before_call_mib: mib(before),
      peak_rss_mib: mib(process.resourceUsage().maxRSS * 1024),
      largest_part_bytes: largestPart,
      request_mib: mib(requestBytes),
      seconds: seconds.toFixed(1),
    }),
  );
}

await main();
