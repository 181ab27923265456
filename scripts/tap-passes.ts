/**
 * The passes of tap that `npm test` runs, each followed by the time of its slowest test files
 * (scripts/test-times.ts): every test file (stores on SQLite unless a test says otherwise), then
 * the HTTP, MCP, worker, service and webhook suites again with their store on PostgreSQL.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { browserTestsSkippedNotice } from '../test/helpers/chromium.js';
import { postgresTestUrl, reachable } from '../test/helpers/postgres.js';
import { fileTimes, timesReport } from './test-times.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The suites run a second time on PostgreSQL (TEST_STORE=postgres). */
export const POSTGRES_SUITES = ['test/http', 'test/mcp', 'test/worker', 'test/services', 'test/webhooks'];

export interface Pass {
  status: number;
  /** The times of its slowest files; null for a pass that did not run. */
  report: string | null;
}

/**
 * tap over args (its configured files when none) with env. Its times are read as soon as it ends:
 * the next run of tap clears what they are read from.
 */
export function tapPass(label: string, args: string[], env: NodeJS.ProcessEnv): Pass {
  const started = Date.now();
  const tap = spawnSync('tap', args, { stdio: 'inherit', env, shell: false });
  const wallMs = Date.now() - started;
  return { status: tap.status ?? 1, report: timesReport(label, fileTimes(ROOT, started), wallMs) };
}

/**
 * The PostgreSQL pass; where no PostgreSQL answers (a laptop without one), skipped with a line
 * that says so (.ci/run starts one).
 */
export async function postgresPass(): Promise<Pass> {
  if (!(await reachable())) {
    process.stdout.write(`# PostgreSQL pass skipped: no PostgreSQL at ${postgresTestUrl()}\n`);
    return { status: 0, report: null };
  }
  return tapPass('PostgreSQL pass', POSTGRES_SUITES, { ...process.env, TEST_STORE: 'postgres' });
}

/**
 * What the test command ends with: each pass's times, in the order they ran, then the line saying
 * the browser tests were skipped, when they were (no Chromium).
 */
export function closingText(passes: Pass[]): string {
  return [...passes.map((pass) => pass.report), browserTestsSkippedNotice()].filter((text) => text !== null).join('');
}

/** Prints the closing text and exits with the first failed pass's status (0 when none failed). */
export function finish(passes: Pass[]): never {
  process.stdout.write(closingText(passes));
  process.exit(passes.find((pass) => pass.status !== 0)?.status ?? 0);
}
