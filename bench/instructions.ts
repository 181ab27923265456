/**
 * Instructions per request, counted by callgrind: a figure that does not move with the machine's
 * load or speed, for telling two builds apart where time is too noisy to (BENCHMARKS.md, "Method").
 *
 * Each server runs under `valgrind --tool=callgrind` with V8 on one thread (`--single-threaded`:
 * no concurrent compiler or GC threads, whose work would land in the count at random). A client
 * in this process sends `--warm` requests uncounted, then `--requests` counted ones, one at a time
 * over one keep-alive connection, so that no batching (group commit, end-of-turn writes) depends
 * on timing. Counted: every instruction of the server process in user space, all threads
 * (system calls' kernel work is not).
 *
 * A server process sometimes settles into a slower state of its own (BENCHMARKS.md: Node's
 * `process.nextTick` building its tick objects through V8's runtime, about 25–35 k more
 * instructions per read), so each target runs in several processes and the lowest count is its
 * figure; every count is printed.
 *
 *   npm run build && npm run bench:instructions -- [--scenario read,create] [--processes 3]
 *       [--requests 10000] [--warm 5000] [--compare-root /tmp/before,…]
 *
 * Takes about a minute per process (two run at once); prints a table and writes
 * bench/results/instructions-latest.json. With KEEP_CALLGRIND=1 each process's profile is kept
 * (its directory is printed) for `callgrind_annotate`; add `--perf-basic-prof` to a target's
 * command line to have V8 name its compiled functions in /tmp/perf-<pid>.map.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT, createBenchKey, freePort, serviceEnv, startChild, type ChildServer } from './lib/processes.js';
import { CREATE_PATH, TEXT_TO_IMAGE } from './lib/requests.js';

const { values: flags } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'read,create' },
    processes: { type: 'string', default: '3' },
    requests: { type: 'string', default: '10000' },
    warm: { type: 'string', default: '5000' },
    'compare-root': { type: 'string' },
    parallel: { type: 'string', default: '2' },
  },
});

type Scenario = 'read' | 'create';
const scenarios = flags.scenario!.split(',') as Scenario[];
for (const s of scenarios) if (s !== 'read' && s !== 'create') throw new Error(`unknown scenario ${s}; read or create`);
const PROCESSES = Number(flags.processes);
const REQUESTS = Number(flags.requests);
const WARM = Number(flags.warm);
const PARALLEL = Number(flags.parallel);


interface Target {
  name: string;
  /** Command line after `node --single-threaded`. */
  args: string[];
  /** Per process: its environment, and once it is up, the request to count. */
  prepare(scenario: Scenario, dataDir: string): Promise<{ env: Record<string, string>; afterStart(baseUrl: string): Promise<CountedRequest> }>;
}

interface CountedRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

const reference: Target = {
  name: 'reference',
  args: ['--import', 'tsx', join(REPO_ROOT, 'bench/reference-server.ts')],
  async prepare(scenario) {
    return {
      env: { PATH: process.env.PATH ?? '' },
      afterStart: async () => requestOf(scenario, { path: `${CREATE_PATH}/0193c1f0-0000-7000-8000-000000000000`, auth: {} }),
    };
  },
};

const serviceAt = (name: string, root: string): Target => ({
  name,
  args: [join(root, 'dist/src/cli.js'), 'serve'],
  async prepare(scenario, dataDir) {
    const env = serviceEnv(dataDir);
    const { key } = await createBenchKey('dist', env, root);
    const auth = { authorization: `Bearer ${key}` };
    return {
      env,
      afterStart: async (baseUrl) => {
        if (scenario === 'create') return requestOf('create', { path: CREATE_PATH, auth });
        const created = await fetch(baseUrl + CREATE_PATH, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: TEXT_TO_IMAGE });
        const { data } = (await created.json()) as { data: { task_id: string } };
        return requestOf('read', { path: `${CREATE_PATH}/${data.task_id}`, auth });
      },
    };
  },
});

function requestOf(scenario: Scenario, options: { path: string; auth: Record<string, string> }): CountedRequest {
  return scenario === 'create'
    ? { method: 'POST', path: CREATE_PATH, headers: { ...options.auth, 'content-type': 'application/json' }, body: TEXT_TO_IMAGE }
    : { method: 'GET', path: options.path, headers: options.auth };
}

/** One process of a target under callgrind: k instructions per counted request. */
async function countOneProcess(target: Target, scenario: Scenario): Promise<number> {
  const work = mkdtempSync(join(tmpdir(), 'imagegen-instructions-'));
  let server: ChildServer | undefined;
  try {
    const prepared = await target.prepare(scenario, join(work, 'data'));
    const outFile = join(work, 'callgrind.out');
    const port = await freePort();
    const env = { ...prepared.env, PORT: String(port), HOST: '127.0.0.1' };
    server = await startChild({
      name: target.name,
      command: 'valgrind',
      args: ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${outFile}`, process.execPath, '--single-threaded', ...target.args],
      env,
      port,
      logFile: join(work, 'server.log'),
      readyPath: '/healthz',
      // A server under valgrind starts many times slower.
      readyTimeoutMs: 180_000,
    });
    // valgrind names its control pipe after the USER and HOST variables it was started with, and
    // callgrind_control finds it by its own: it must run with the same ones.
    const control = (state: 'on' | 'off') => execFileSync('callgrind_control', [`--instr=${state}`, String(server!.pid)], { env, stdio: 'ignore' });
    const counted = await prepared.afterStart(server.url);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await sendSequentially(port, agent, counted, WARM);
      control('on');
      await sendSequentially(port, agent, counted, REQUESTS);
      control('off');
    } finally {
      agent.destroy();
    }
    await server.stop();
    // One "totals:" line per part the profile was dumped in.
    const total = readFileSync(outFile, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('totals:'))
      .reduce((sum, line) => sum + Number(line.split(' ')[1]), 0);
    return Math.round(total / REQUESTS / 100) / 10;
  } finally {
    await server?.stop();
    if (process.env.KEEP_CALLGRIND) process.stderr.write(`kept ${work}\n`);
    else rmSync(work, { recursive: true, force: true });
  }
}

/** n requests, each sent when the last one's answer has been read; any other status than 2xx throws. */
async function sendSequentially(port: number, agent: Agent, counted: CountedRequest, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, agent, method: counted.method, path: counted.path, headers: counted.headers }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      });
      req.once('error', reject);
      req.end(counted.body);
    });
    if (status < 200 || status > 299) throw new Error(`${counted.method} ${counted.path} answered ${status}`);
  }
}

/** Runs the jobs, `limit` at a time, and gives their results in order. */
async function inParallel<T>(jobs: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, jobs.length) }, async () => {
      while (next < jobs.length) {
        const i = next++;
        results[i] = await jobs[i]();
      }
    }),
  );
  return results;
}

const compared = (flags['compare-root']?.split(',') ?? []).map((dir) => serviceAt(basename(dir), dir));
const targets = [reference, ...compared, serviceAt('service', REPO_ROOT)];
const results: { scenario: Scenario; target: string; counts: number[]; lowest: number }[] = [];
const started = Date.now();
for (const scenario of scenarios) {
  // Processes of every target interleaved, so that a build never runs all its processes last.
  const jobs = Array.from({ length: PROCESSES }, () => targets.map((target) => ({ target, run: () => countOneProcess(target, scenario) }))).flat();
  const counts = await inParallel(jobs.map((job) => job.run), PARALLEL);
  for (const target of targets) {
    const own = counts.filter((_, i) => jobs[i].target === target);
    results.push({ scenario, target: target.name, counts: own, lowest: Math.min(...own) });
    process.stderr.write(`[instructions] ${scenario} ${target.name}: ${own.join(', ')} k per request\n`);
  }
}

const lines = ['scenario  target                 k instr./req (lowest)   each process           / reference'];
for (const row of results) {
  const ref = results.find((r) => r.scenario === row.scenario && r.target === 'reference')!;
  lines.push(
    `${row.scenario.padEnd(9)} ${row.target.padEnd(22)} ${String(row.lowest).padStart(10)}             ${row.counts.join(', ').padEnd(22)} ${row.target === 'reference' ? '' : `${Math.round((ref.lowest / row.lowest) * 100)} %`}`,
  );
}
console.log(lines.join('\n'));
const resultsDir = join(REPO_ROOT, 'bench/results');
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  join(resultsDir, 'instructions-latest.json'),
  `${JSON.stringify({ at: new Date().toISOString(), node: process.version, requests: REQUESTS, warm: WARM, processes: PROCESSES, results }, null, 2)}\n`,
);
process.stderr.write(`[instructions] done in ${Math.round((Date.now() - started) / 1000)} s\n`);
