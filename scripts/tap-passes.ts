/**
 * The passes of tap that `npm test` runs, each followed by the time of its slowest test files
 * (scripts/test-times.ts): every test file (stores on SQLite unless a test says otherwise), then
 * the HTTP, MCP, worker, service and webhook suites again with their store on PostgreSQL, less the
 * files that say the second pass would run nothing new (postgresPassFiles).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { browserTestsSkippedNotice } from '../test/helpers/chromium.js';
import { postgresTestUrl, reachable } from '../test/helpers/postgres.js';
import { fileTimes, timesReport } from './test-times.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The suites run a second time on PostgreSQL (TEST_STORE=postgres). */
export const POSTGRES_SUITES = ['test/http', 'test/mcp', 'test/worker', 'test/services', 'test/webhooks'];

/**
 * The line by which a test file of those suites leaves the PostgreSQL pass, saying why: it never
 * reaches the store (a parser, a fake store, a static page), or it ran on every store in the first
 * pass already. A file that reaches the store TEST_STORE names must not have it.
 */
const LEFT_OUT = /^\/\/ Not in the PostgreSQL pass: (\S.*)$/m;

export interface PostgresPassFiles {
  /** The test files the pass runs, relative to the project. */
  files: string[];
  /** Those it leaves out, each with the reason its marker line gives. */
  leftOut: { file: string; reason: string }[];
}

/** The test files of POSTGRES_SUITES in projectRoot, sorted, split by their marker line. */
export function postgresPassFiles(projectRoot: string, suites: readonly string[] = POSTGRES_SUITES): PostgresPassFiles {
  const selection: PostgresPassFiles = { files: [], leftOut: [] };
  for (const suite of suites) {
    const names = readdirSync(join(projectRoot, suite), { recursive: true, encoding: 'utf8' });
    for (const name of names.filter((n) => n.endsWith('.test.ts')).sort()) {
      const file = `${suite}/${name}`;
      const reason = LEFT_OUT.exec(readFileSync(join(projectRoot, file), 'utf8'))?.[1];
      if (reason) selection.leftOut.push({ file, reason });
      else selection.files.push(file);
    }
  }
  return selection;
}

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
  const { files, leftOut } = postgresPassFiles(ROOT);
  process.stdout.write(
    `# PostgreSQL pass: ${files.length} test files of ${POSTGRES_SUITES.join(', ')}; ` +
      `${leftOut.length} left out, each saying why in a line "// Not in the PostgreSQL pass: …"\n`,
  );
  // TEST_PASS tells testOnEveryStore (test/helpers/store.ts) that its tests ran on every store already.
  return tapPass('PostgreSQL pass', files, { ...process.env, TEST_STORE: 'postgres', TEST_PASS: 'postgres' });
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
