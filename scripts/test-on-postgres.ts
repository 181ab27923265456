/**
 * The second pass of `npm test`: the HTTP, MCP, worker, service and webhook suites again with their
 * store on PostgreSQL (TEST_STORE=postgres), so that "same tests, different adapters" holds for
 * every test and not only for those written over both stores. Where no PostgreSQL answers (a
 * laptop without one), the pass is skipped with a line that says so; .ci/run starts one.
 * As the last step of `npm test`, it ends with a line saying the browser tests were skipped, when
 * they were (no Chromium).
 */
import { spawnSync } from 'node:child_process';
import { browserTestsSkippedNotice } from '../test/helpers/chromium.js';
import { postgresTestUrl, reachable } from '../test/helpers/postgres.js';

const SUITES = ['test/http', 'test/mcp', 'test/worker', 'test/services', 'test/webhooks'];

function exit(status: number): never {
  const notice = browserTestsSkippedNotice();
  if (notice) process.stdout.write(notice);
  process.exit(status);
}

if (!(await reachable())) {
  process.stdout.write(`# PostgreSQL pass skipped: no PostgreSQL at ${postgresTestUrl()}\n`);
  exit(0);
}
const tap = spawnSync('tap', SUITES, {
  stdio: 'inherit',
  env: { ...process.env, TEST_STORE: 'postgres' },
  shell: false,
});
exit(tap.status ?? 1);
