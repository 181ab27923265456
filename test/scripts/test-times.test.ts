import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { closingText } from '../../scripts/tap-passes.js';
import { duration, fileTimes, timesReport } from '../../scripts/test-times.js';
import { browserTestsSkippedNotice } from '../helpers/chromium.js';

/**
 * `npm test` ends with each pass's test files, slowest first, read from what tap leaves in .tap/
 * (scripts/test-times.ts). Here on a made-up .tap/ of the kind tap writes.
 */

/** A test file's process record as tap's processinfo writes it (other fields left out). */
const record = (file: string, runtime: number) => ({ externalID: file, parent: null, runtime, argv: ['node', file] });
/** The record of a process a test started (the CLI): it has a parent and no externalID. */
const child = (runtime: number) => ({ parent: 'a-test-file', runtime, argv: ['node', 'src/cli.ts', 'serve'] });

function projectWith(t: Test, records: object[], results: string[] = []) {
  const processinfo = Object.fromEntries(records.map((r, i) => [`p${i}.json`, JSON.stringify(r)]));
  const root = t.testdir({ '.tap': { processinfo } });
  for (const file of results) {
    const path = join(root, '.tap/test-results', `${file}.tap`);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, 'TAP version 14\n');
  }
  return root;
}

t.test(
  'the test files of the run, slowest first, with their run times; the processes they started are not files',
  async (t) => {
    const root = projectWith(t, [
      record('test/a.test.ts', 1200),
      child(40_000),
      record('test/http/b.test.ts', 41_000.5),
      record('test/c.test.ts', 1200),
    ]);
    t.same(fileTimes(root), [
      { file: 'test/http/b.test.ts', ms: 41_000.5 },
      { file: 'test/a.test.ts', ms: 1200 },
      { file: 'test/c.test.ts', ms: 1200 },
    ]);
  },
);

t.test('no .tap at all (tap not run yet): no files', async (t) => {
  t.same(fileTimes(t.testdir({})), []);
});

t.test(
  'a file whose output was written during the run but whose process left no record comes first, without a time',
  async (t) => {
    const root = projectWith(
      t,
      [record('test/a.test.ts', 1200)],
      ['test/a.test.ts', 'test/killed.test.ts', 'test/old.test.ts'],
    );
    const since = Date.now() - 60_000;
    // Output of an earlier run (tap never empties test-results/): not of this run.
    utimesSync(join(root, '.tap/test-results/test/old.test.ts.tap'), new Date(since - 1000), new Date(since - 1000));
    t.same(fileTimes(root, since), [
      { file: 'test/killed.test.ts', ms: null },
      { file: 'test/a.test.ts', ms: 1200 },
    ]);
  },
);

t.test('the report: the pass, its file count, wall time and sum, then its 15 slowest files', async (t) => {
  const times = Array.from({ length: 20 }, (_, i) => ({ file: `test/f${i}.test.ts`, ms: (20 - i) * 1000 }));
  const lines = timesReport('SQLite pass', times, 125_000).trimEnd().split('\n');
  t.equal(
    lines[0],
    '# SQLite pass: 20 test files in 2 min 5 s (their run times add up to 3 min 30 s); the 15 slowest:',
  );
  t.equal(lines.length, 16);
  t.equal(lines[1], '#    20.0 s  test/f0.test.ts');
  t.equal(lines[15], '#     6.0 s  test/f14.test.ts');
});

t.test('a report of fewer files than the limit lists each; one without a time says so', async (t) => {
  const report = timesReport(
    'PostgreSQL pass',
    [
      { file: 'test/killed.test.ts', ms: null },
      { file: 'test/a.test.ts', ms: 1234 },
    ],
    9000,
  );
  t.equal(
    report,
    [
      '# PostgreSQL pass: 2 test files in 9.0 s (their run times add up to 1.2 s); each:',
      '#   no time  test/killed.test.ts',
      '#     1.2 s  test/a.test.ts',
      '',
    ].join('\n'),
  );
  t.equal(timesReport('Empty pass', [], 800), '# Empty pass: 0 test files in 0.8 s.\n');
});

t.test('no line of the report can be counted as a test by .ci/run, whatever the file names', async (t) => {
  const times = [
    { file: 'ok 1 - test/x.test.ts', ms: 5000 },
    { file: 'not ok 2 - test/y.test.ts', ms: 4000 },
  ];
  for (const line of timesReport('    ok 3 pass', times, 9000).trimEnd().split('\n')) {
    t.match(line, /^# /, line);
    t.notMatch(line, /^( {4})?(not )?ok [0-9]+ /, line);
  }
});

t.test('durations: seconds with a decimal under a minute, minutes and seconds above', async (t) => {
  t.equal(duration(41_049), '41.0 s');
  t.equal(duration(59_949), '59.9 s');
  t.equal(duration(60_000), '1 min 0 s');
  t.equal(duration(754_400), '12 min 34 s');
});

t.test('the test command closes with each pass report in the order they ran, the browser notice last', async (t) => {
  const text = closingText([
    { status: 0, report: '# SQLite pass: …\n' },
    { status: 1, report: '# PostgreSQL pass: …\n' },
    { status: 0, report: null },
  ]);
  t.equal(text, `# SQLite pass: …\n# PostgreSQL pass: …\n${browserTestsSkippedNotice() ?? ''}`);
});
