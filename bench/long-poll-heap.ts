/**
 * What one waiting long-poll holds: `serve` (dist, no workers, so nothing completes) with N
 * `GET …?wait=60` waiting, each on a socket of its own; RSS and V8's heap before and while they
 * wait, and, with --snapshot, heap snapshots of both moments (SIGUSR2, in the service's cwd) to
 * compare by constructor; then the service's CPU time over 10 s while they wait (what idle waits
 * cost: the change poll, the timer wheel). Not part of `npm run bench`: a tool for finding where
 * the memory and the idle CPU go. --service-root runs another built checkout's service.
 *
 *   tsx bench/long-poll-heap.ts [--waiters 2000] [--via long-poll|event-stream] [--snapshot] [--service-root DIR]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { cpuSecondsOf } from './lib/load.js';
import { memoryOf, mib } from './lib/memory.js';
import { createBenchKey, serviceEnv, startService } from './lib/processes.js';
import { CREATE_PATH, textToImage } from './lib/requests.js';

const { values: flags } = parseArgs({
  options: {
    waiters: { type: 'string', default: '2000' },
    via: { type: 'string', default: 'long-poll' },
    snapshot: { type: 'boolean', default: false },
    'glibc-defaults': { type: 'boolean', default: false },
    'service-root': { type: 'string' },
  },
});
const waiters = Number(flags.waiters);
const work = await mkdtemp(join(tmpdir(), 'imagegen-lp-heap-'));
const env = serviceEnv(join(work, 'data'), {
  WORKER_CONCURRENCY: '0',
  ...(flags['glibc-defaults'] ? {} : { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '2' }),
  ...(flags.snapshot ? { NODE_OPTIONS: '--heapsnapshot-signal=SIGUSR2' } : {}),
});
const root = flags['service-root'];
const { key } = await createBenchKey('dist', env, root);
const server = await startService({ name: 'lp-heap', runtime: 'dist', env, logFile: join(work, 'serve.log'), root });
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
try {
  const small = new Pool(server.url, { connections: 20 });
  const ids: string[] = [];
  for (let i = 0; i < waiters; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, waiters - i) }, async () => {
        const res = await small.request({ method: 'POST', path: CREATE_PATH, headers: auth, body: textToImage('1K') });
        return ((await res.body.json()) as { data: { task_id: string } }).data.task_id;
      }),
    );
    ids.push(...batch);
  }
  await small.close();
  // Settle: the creates' garbage collected, so that what grows next is the waits'.
  await new Promise((r) => setTimeout(r, 2000));
  const before = memoryOf(server.pid).rss;
  if (flags.snapshot) {
    process.kill(server.pid, 'SIGUSR2');
    await new Promise((r) => setTimeout(r, 8000));
  }
  const pool = new Pool(server.url, { connections: waiters, connectTimeout: 60_000, headersTimeout: 120_000 });
  const path = (id: string) =>
    flags.via === 'event-stream' ? `${CREATE_PATH}/${id}/events` : `${CREATE_PATH}/${id}?wait=60`;
  const pending = ids.map((id) =>
    pool.request({ method: 'GET', path: path(id), headers: { authorization: auth.authorization } }).then(
      (r) => r.body.dump(),
      () => undefined,
    ),
  );
  await new Promise((r) => setTimeout(r, Math.max(5000, waiters * 2)));
  const during = memoryOf(server.pid).rss;
  process.stdout.write(
    `${waiters} ${flags.via}s: RSS ${mib(before)} → ${mib(during)} MiB, +${mib(during - before)} MiB, ${((during - before) / waiters / 1024).toFixed(1)} KiB each\n`,
  );
  if (flags.snapshot) {
    process.kill(server.pid, 'SIGUSR2');
    await new Promise((r) => setTimeout(r, 15000));
  }
  const cpuBefore = cpuSecondsOf(server.pid);
  await new Promise((r) => setTimeout(r, 10_000));
  const cpuAfter = cpuSecondsOf(server.pid);
  if (cpuBefore !== null && cpuAfter !== null)
    process.stdout.write(`while they wait: ${(((cpuAfter - cpuBefore) / 10) * 1000).toFixed(1)} ms of CPU a second\n`);
  await pool.destroy();
  await Promise.allSettled(pending);
} finally {
  await server.stop();
  if (!flags.snapshot) await rm(work, { recursive: true, force: true });
  else process.stdout.write(`snapshots in ${process.cwd()} (the service's cwd)\n`);
}
