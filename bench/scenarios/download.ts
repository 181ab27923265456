/**
 * docs/design.md §5, results: a 4K PNG through its signed URL ≥ 70 % of `@fastify/static` serving the same
 * file, same run.
 *
 * `serve` with one in-process worker renders one text-to-image 4K task; its result's signed URL
 * (the task's `generated[0].url`, no key) is loaded against a reference process (the bare fastify
 * reference with `@fastify/static`, bench/reference-server.ts) that serves the service's own blob
 * directory, so both send the very same file. Alternating rounds as for the other ratios. The
 * client is undici rather than autocannon, whose HTTP parser in JavaScript reads a large body at
 * about 80 MB/s on this machine and made both servers wait for it (measured: 102 % with both at
 * a third of a core).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pool } from 'undici';
import { mediaBlobKey } from '../../src/services/media-service.js';
import { alternate, cpuSecondsOf, median, quantile, summarize } from '../lib/load.js';
import type { LoadOptions, LoadSample } from '../lib/load.js';
import { startReference, type ChildServer } from '../lib/processes.js';
import type { DownloadResult, HttpRow } from '../lib/report.js';
import { textToImage } from '../lib/requests.js';
import { createTask, waitForTask, type ScenarioContext } from './context.js';

export const DOWNLOAD_CONNECTIONS = 10;

export interface DownloadContext extends ScenarioContext {
  workDir: string;
  rounds: number;
  load: LoadOptions;
  onSample(name: string, s: LoadSample): void;
}

export async function downloadScenario(ctx: DownloadContext): Promise<{ result: DownloadResult; row: HttpRow }> {
  const { server, auth, dataDir } = await ctx.launchService('service-download', { WORKER_CONCURRENCY: '1' });
  let reference: ChildServer | null = null;
  const pool = new Pool(server.url, { connections: 1 });
  try {
    const task = await waitForTask(pool, auth, (await createTask(pool, auth, textToImage('4K'))).task_id, 60);
    if (task.status !== 'COMPLETED') throw new Error(`download: the 4K task ended ${task.status}`);
    const [image] = task.generated;
    const signed = new URL(image.url);
    const blobsDir = join(dataDir, 'blobs');
    const file = await readFile(join(blobsDir, mediaBlobKey(image.media_id)));
    // The signed URL must give exactly the stored file, or the comparison means nothing.
    const viaUrl = await pool.request({ method: 'GET', path: signed.pathname + signed.search });
    const downloaded = Buffer.from(await viaUrl.body.arrayBuffer());
    if (viaUrl.statusCode !== 200 || !downloaded.equals(file)) {
      throw new Error(`download: the signed URL answered ${viaUrl.statusCode} with other bytes`);
    }

    reference = await startReference(join(ctx.workDir, 'reference-static.log'), blobsDir);
    const options: LoadOptions = { ...ctx.load, connections: DOWNLOAD_CONNECTIONS };
    ctx.log(
      `download of a 4K PNG (${(file.length / 1024 / 1024).toFixed(2)} MiB): ${ctx.rounds} rounds of ` +
        `@fastify/static / signed URL, ${DOWNLOAD_CONNECTIONS} connections`,
    );
    const targets = [
      downloadTarget('reference', reference, `/static/${mediaBlobKey(image.media_id)}`),
      downloadTarget('service', server, signed.pathname + signed.search),
    ];
    const { samples } = await alternate(targets, ctx.rounds, options, ctx.onSample).finally(() =>
      Promise.all(targets.map((target) => target.close())),
    );
    const result: DownloadResult = {
      bytes: file.length,
      sha256: createHash('sha256').update(file).digest('hex'),
      connections: DOWNLOAD_CONNECTIONS,
    };
    return {
      result,
      row: {
        id: 'download',
        title: 'Download a 4K PNG through its signed URL (reference: @fastify/static)',
        connections: DOWNLOAD_CONNECTIONS,
        service: summarize(samples.service, samples.reference),
        reference: summarize(samples.reference),
        serviceSamples: samples.service,
        referenceSamples: samples.reference,
      },
    };
  } finally {
    await pool.close();
    await reference?.stop();
    await ctx.stop(server);
  }
}

/** One GET of path after another on each of `connections` sockets, for the run's duration (undici). */
function downloadTarget(name: string, server: ChildServer, path: string) {
  const pool = new Pool(server.url, { connections: DOWNLOAD_CONNECTIONS, pipelining: 1 });
  const run = async (durationSec: number, connections: number) => {
    const latencies: number[] = [];
    const statusCodes: Record<string, number> = {};
    let errors = 0;
    let bytes = 0;
    const deadline = performance.now() + durationSec * 1000;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < deadline) {
          const started = performance.now();
          try {
            const res = await pool.request({ method: 'GET', path });
            for await (const chunk of res.body) bytes += (chunk as Buffer).length;
            latencies.push(performance.now() - started);
            statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
          } catch {
            errors++;
          }
        }
      }),
    );
    return { latencies: latencies.sort((a, b) => a - b), statusCodes, errors, bytes };
  };
  const load = async (options: LoadOptions): Promise<LoadSample> => {
    if (options.warmupSec > 0) await run(options.warmupSec, options.connections);
    const cpuBefore = cpuSecondsOf(server.pid);
    const started = performance.now();
    const { latencies, statusCodes, errors, bytes } = await run(options.durationSec, options.connections);
    const durationSec = (performance.now() - started) / 1000;
    const cpuSec = cpuBefore === null ? null : (cpuSecondsOf(server.pid) ?? cpuBefore) - cpuBefore;
    const requests = latencies.length;
    const round = (n: number) => Math.round(n * 10) / 10;
    return {
      rps: requests / durationSec,
      p50: round(median(latencies)),
      p90: round(quantile(latencies, 0.9)),
      p99: round(quantile(latencies, 0.99)),
      max: round(latencies[latencies.length - 1] ?? Number.NaN),
      non2xx: Object.entries(statusCodes).reduce((n, [code, count]) => (code.startsWith('2') ? n : n + count), 0),
      errors,
      requests,
      durationSec,
      sentBytesPerSec: 0,
      receivedBytesPerSec: bytes / durationSec,
      statusCodes,
      cpuUsPerRequest: cpuSec !== null && requests > 0 ? Math.round((cpuSec * 1e6) / requests) : null,
      cpuCores: cpuSec !== null ? Math.round((cpuSec / durationSec) * 100) / 100 : null,
    };
  };
  const request = { method: 'GET' as const, path };
  return { name, baseUrl: server.url, pid: server.pid, request, load, close: () => pool.close() };
}
