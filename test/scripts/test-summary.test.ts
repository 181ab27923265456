import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/**
 * `npm test` (scripts/test-passes.ts) and `npm run test:postgres` (scripts/test-on-postgres.ts) end
 * alike (scripts/tap-passes.ts): the last line says the browser tests were skipped when Chromium is
 * missing, and only then. Run here on test-on-postgres.ts with no PostgreSQL (a closed port), so
 * that the pass itself is skipped at once.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function lastPass(chromiumPath: string) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/test-on-postgres.ts'], {
    cwd: ROOT,
    env: { ...process.env, CHROMIUM_PATH: chromiumPath, TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:9/none' },
    encoding: 'utf8',
  });
  return { status: run.status, lines: run.stdout.trim().split('\n') };
}

t.test(
  'without Chromium the test command ends with a line saying the browser tests were skipped, and why',
  async (t) => {
    const { status, lines } = lastPass('/nonexistent/chromium');
    t.equal(status, 0);
    t.match(lines[0], /^# PostgreSQL pass skipped/);
    t.match(
      lines.at(-1),
      /^# Browser tests skipped: no Chromium at \/nonexistent\/chromium \(apt-get install -y chromium/,
    );
  },
);

t.test('with Chromium there is no such line', async (t) => {
  // Any file that exists stands for the browser: the script only looks for it.
  const { status, lines } = lastPass(process.execPath);
  t.equal(status, 0);
  t.notOk(
    lines.some((line) => line.includes('Browser tests skipped')),
    lines.join('\n'),
  );
});

t.test(
  'the runner is no test: importing it starts no root test of tap that would time out in its output',
  async (t) => {
    // A module of the runner that imported tap (a test helper, say) started tap's root test in the
    // runner's process, which printed "not ok 1 - timeout!" into npm test's output minutes later.
    // Here tap is given a second to time out, as it would in the runner.
    const environment = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TAP')));
    const run = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        "await import('./scripts/tap-passes.ts'); await new Promise((resolve) => setTimeout(resolve, 1500));",
      ],
      { cwd: ROOT, env: { ...environment, TAP_TIMEOUT: '1' }, encoding: 'utf8' },
    );
    t.equal(run.status, 0);
    t.equal(run.stdout, '', 'nothing printed');
  },
);
