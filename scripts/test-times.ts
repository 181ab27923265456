/**
 * The time each test file of a tap run took, so that `npm test` can end by naming the slowest.
 *
 * tap records every process it starts in .tap/processinfo/ (one JSON file per process, the
 * directory cleared at the start of each run of the whole suite or of a list of files): a test
 * file's record has the file as its externalID, no parent, and its run time in ms (from its start
 * to its exit, module loading included). The processes a test starts (the CLI, a worker) have a
 * parent and are counted in their test file's time. A file whose process died without a record
 * (SIGKILL) still has its output in .tap/test-results/, written during the run.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface FileTime {
  /** The test file, as tap names it (relative to the project). */
  file: string;
  /** Its process's run time, or null when the process left no record. */
  ms: number | null;
}

interface ProcessRecord {
  externalID?: string;
  parent?: string | null;
  runtime?: number;
}

/**
 * The test files of the last tap run in projectRoot, slowest first. `since` (ms since the epoch,
 * when the run started) also lists the files whose output was written since then but whose process
 * left no record.
 */
export function fileTimes(projectRoot: string, since?: number): FileTime[] {
  const times = new Map<string, number | null>();
  const records = join(projectRoot, '.tap/processinfo');
  for (const name of listFiles(records)) {
    if (!name.endsWith('.json')) continue;
    let record: ProcessRecord;
    try {
      record = JSON.parse(readFileSync(join(records, name), 'utf8')) as ProcessRecord;
    } catch {
      continue; // a record being written as the run ends
    }
    if (record.parent || typeof record.externalID !== 'string') continue;
    times.set(record.externalID, typeof record.runtime === 'number' ? record.runtime : null);
  }
  if (since !== undefined) {
    const results = join(projectRoot, '.tap/test-results');
    for (const path of listFiles(results, true)) {
      if (!path.endsWith('.tap')) continue;
      const full = join(results, path);
      const file = relative(results, full).slice(0, -'.tap'.length);
      if (!times.has(file) && statSync(full).mtimeMs >= since) times.set(file, null);
    }
  }
  return [...times]
    .map(([file, ms]) => ({ file, ms }))
    .sort((a, b) => (b.ms ?? Number.POSITIVE_INFINITY) - (a.ms ?? Number.POSITIVE_INFINITY) || cmp(a.file, b.file));
}

/**
 * The summary of a pass, as TAP comment lines (each begins with "# ", so that nothing in it reads
 * as a test's result): its wall time, the sum of its files' times, and its `top` slowest files.
 */
export function timesReport(label: string, times: FileTime[], wallMs: number, top = 15): string {
  const timed = times.filter((t) => t.ms !== null);
  const sum = timed.reduce((total, t) => total + (t.ms ?? 0), 0);
  const shown = times.slice(0, top);
  return `${[
    `# ${label}: ${count(times.length, 'test file')} in ${duration(wallMs)}` +
      (timed.length ? ` (their run times add up to ${duration(sum)})` : '') +
      (shown.length ? `; ${shown.length === times.length ? 'each' : `the ${shown.length} slowest`}:` : '.'),
    // A file without a time (its process killed) sorts first: it is the one to look at.
    ...shown.map((t) => `# ${(t.ms === null ? 'no time' : seconds(t.ms)).padStart(9)}  ${t.file}`),
  ].join('\n')}\n`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** 754_000 → "12 min 34 s"; under a minute, seconds with a decimal. */
export function duration(ms: number): string {
  if (ms < 60_000) return seconds(ms);
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function listFiles(dir: string, recursive = false): string[] {
  try {
    return readdirSync(dir, { recursive, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}
