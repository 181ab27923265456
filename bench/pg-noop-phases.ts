/**
 * Where a no-op task's time goes on PostgreSQL: bench/scale-out.ts's no-op scenario (ours only)
 * at 1 and 4 slots, with the worker's claim, blob reservation, blob put and completion timed
 * (mean and p90 ms, each call's own wall time, so at 4 slots it includes waiting for the event
 * loop), and the CPU the bench process spent per task (the worker is in it) beside the rest of
 * the machine's (PostgreSQL, mostly). Not part of `npm run bench`: a tool for finding what a task
 * costs, beside bench/pg-round-trips.ts.
 *
 * --without-blob-put: the result's bytes are not written (the blob store's put answers at once),
 * so that what the queue's statements cost can be told from what the result's durable write does
 * (temp file, fsync, rename, directory fsync, on the same disk as PostgreSQL's WAL).
 *
 *   tsx bench/pg-noop-phases.ts [--without-blob-put] [slots ...]
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { ourNoopThroughput } from './scale-out.js';

/** Busy jiffies of the whole machine (/proc/stat's first line: user, nice, system, irq, softirq). */
function machineJiffies(): { busy: number } {
  const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return { busy: user + nice + system + irq + softirq };
}

function timed<T extends object>(target: T, method: keyof T & string, into: number[]): void {
  const original = (target[method] as (...args: unknown[]) => Promise<unknown>).bind(target);
  (target as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    const start = performance.now();
    try {
      return await original(...args);
    } finally {
      into.push(performance.now() - start);
    }
  };
}

const png = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#000' } })
  .png()
  .toBuffer();
const withoutBlobPut = process.argv.includes('--without-blob-put');
const slotCounts = process.argv
  .slice(2)
  .filter((arg) => !arg.startsWith('--'))
  .map(Number);
for (const slots of slotCounts.length > 0 ? slotCounts : [1, 4]) {
  const phases: Record<string, number[]> = { claim: [], reservation: [], 'blob put': [], completion: [] };
  let cpuBefore = process.cpuUsage();
  let machineBefore = machineJiffies();
  const perSecond = await ourNoopThroughput(png, slots, ({ store, blobs }) => {
    if (withoutBlobPut) blobs.put = async (_key, body) => ({ sizeBytes: Buffer.isBuffer(body) ? body.length : 0 });
    timed(store.tasks, 'claimTasks', phases.claim);
    timed(store.media, 'scheduleBlobDeletion', phases.reservation);
    timed(blobs, 'put', phases['blob put']);
    timed(store.tasks, 'completeTask', phases.completion);
    cpuBefore = process.cpuUsage();
    machineBefore = machineJiffies();
  });
  const cpu = process.cpuUsage(cpuBefore);
  const machine = machineJiffies();
  const tasks = phases.completion.length;
  const tasksPerClaim = tasks / Math.max(1, phases.claim.length);
  const ownMs = (cpu.user + cpu.system) / 1000;
  // Jiffies are 10 ms here (USER_HZ 100).
  const machineMs = (machine.busy - machineBefore.busy) * 10;
  const summary = Object.entries(phases).map(([name, times]) => {
    const sorted = times.sort((a, b) => a - b);
    const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
    return `${name} ${mean.toFixed(2)} (p90 ${(sorted[Math.floor(sorted.length * 0.9)] ?? 0).toFixed(2)})`;
  });
  process.stdout.write(
    `${slots} slot${slots > 1 ? 's' : ''}${withoutBlobPut ? ', without the blob put' : ''}: ${perSecond.toFixed(0)} tasks/s; ${tasksPerClaim.toFixed(2)} tasks per claim; ms per call: ${summary.join(', ')}; ` +
      `CPU per task: this process ${((ownMs / tasks) * 1000).toFixed(0)} µs, ` +
      `the rest of the machine ${(((machineMs - ownMs) / tasks) * 1000).toFixed(0)} µs\n`,
  );
}
