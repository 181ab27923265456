/**
 * `npm run bench:ab`: the guard a developer runs before merging a change to src/http or src/store.
 * The working tree's create (with a plain key and with a scoped one) and read against the merge
 * base with main, in the same alternating rounds as the bare fastify reference (bench/run.ts
 * --compare-root), about three minutes: if the ratios or the CPU per request moved, it shows here,
 * side by side, before it reaches main.
 *
 *   npm run bench:ab                  against `git merge-base HEAD main`
 *   npm run bench:ab -- --base <rev>  against another commit
 *   npm run bench:ab -- --rounds 5    more rounds (default 3, 3 s each after a 1 s warm-up)
 *   npm run bench:ab -- --with-list   the task list at 10 k too (first page and deep cursor), for a
 *                                     change to the store's reads: about a minute more
 *
 * The base is checked out in a temporary worktree (git worktree add), installed with `npm ci` and
 * built once per commit; later runs against the same commit reuse it. Not a timed test in CI: on
 * a shared machine only the per-round ratios and the CPU µs per request are worth reading.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchReport } from './lib/report.js';
import { REPO_ROOT } from './lib/processes.js';

const { values: flags } = parseArgs({
  options: {
    base: { type: 'string' },
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '3' },
    'with-list': { type: 'boolean', default: false },
  },
});

const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
const run = (command: string, args: string[], cwd: string) => {
  const result = spawnSync(command, args, { cwd, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd} (exit ${result.status})`);
};

const base = git('rev-parse', flags.base ?? git('merge-base', 'HEAD', 'main'));
const baseDir = join(tmpdir(), `imagegen-ab-${base.slice(0, 12)}`);
if (!existsSync(join(baseDir, 'dist/src/cli.js'))) {
  process.stderr.write(`[bench:ab] building ${base.slice(0, 12)} in ${baseDir}\n`);
  if (!existsSync(join(baseDir, '.git'))) git('worktree', 'add', '--detach', baseDir, base);
  run('npm', ['ci', '--no-audit', '--no-fund'], baseDir);
  run(process.execPath, [join(baseDir, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], baseDir);
} else {
  process.stderr.write(`[bench:ab] reusing the build of ${base.slice(0, 12)} in ${baseDir}\n`);
}

run(
  process.execPath,
  [
    '--import',
    'tsx',
    join(REPO_ROOT, 'bench/run.ts'),
    '--only',
    flags['with-list'] ? 'create,create-scoped,read,list' : 'create,create-scoped,read',
    // The list's large store is not compared (only 10 k is): kept small so that seeding it is quick.
    ...(flags['with-list'] ? ['--list-size', '20000'] : []),
    '--rounds',
    flags.rounds,
    '--duration',
    flags.duration,
    '--compare-root',
    baseDir,
  ],
  REPO_ROOT,
);

const report = JSON.parse(readFileSync(join(REPO_ROOT, 'bench/results/latest.json'), 'utf8')) as BenchReport;
const baseName = `imagegen-ab-${base.slice(0, 12)}`;
const pct = (ratio: number | null) => (ratio === null ? '–' : `${Math.round(ratio * 100)} %`);
const lines = [`\nworking tree against ${base.slice(0, 12)}${flags.base ? '' : ' (merge base)'}, same rounds:`];
for (const scenario of ['create', 'create-scoped', 'read', 'list-first-10k', 'list-deep-10k']) {
  const mine = report.http.find((row) => row.id === scenario);
  const theirs = report.http.find((row) => row.id === `${scenario}@${baseName}`);
  if (!mine || !theirs) continue;
  lines.push(
    `  ${scenario.padEnd(15)} ratio ${pct(theirs.service.ratio)} → ${pct(mine.service.ratio)} of the reference` +
      ` (rounds: ${theirs.service.ratios.map(pct).join(', ')} → ${mine.service.ratios.map(pct).join(', ')});` +
      ` CPU ${theirs.service.cpuUsPerRequest} → ${mine.service.cpuUsPerRequest} µs/req;` +
      ` p99 ${theirs.service.p99} → ${mine.service.p99} ms`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);
