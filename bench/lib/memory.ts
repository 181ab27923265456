import { readFileSync, writeFileSync } from 'node:fs';

const MiB = 1024 * 1024;

/** VmRSS and VmHWM (peak RSS) of a process, in bytes, from /proc/<pid>/status. */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') };
}

/** Resets VmHWM to the current RSS (Linux ≥ 4.0: write 5 to clear_refs). False where not allowed. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Samples VmRSS every intervalMs until stopped; the peak is also taken from VmHWM when it could be reset. */
export function sampleRss(pid: number, intervalMs = 10): { stop(): { peak: number } } {
  let peak = memoryOf(pid).rss;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, memoryOf(pid).rss);
    } catch {
      // process gone
    }
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return { peak };
    },
  };
}

export const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;
