/**
 * Scale-out scenarios (docs/design.md §5) on the machine's PostgreSQL, each figure beside graphile-worker
 * 0.18 measured in the same run on the same database: dispatch latency (create → generator called)
 * at light load, no-op tasks per second with 1, 2 and 4 worker slots, and creates per second
 * through 1 and 2 `api` processes. Run alone with `npm run bench:scale-out`; `runScaleOutBench`
 * returns the rows for the main bench's report.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Logger, makeWorkerUtils, run as runGraphileWorker, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import sharp from 'sharp';
import { FsBlobStore } from '../src/blobs/fs-blob-store.js';
import { createTask } from '../src/core/task.js';
import type { GeneratedImage, GenerationInput, ImageGenerator } from '../src/generators/port.js';
import { newIdAt } from '../src/ids.js';
import { createAccountWithKey } from '../src/services/api-keys.js';
import { encodeCursor } from '../src/store/cursor.js';
import { TaskEvents } from '../src/services/task-events.js';
import { PostgresStore } from '../src/store/postgres/postgres-store.js';
import { TaskWorker } from '../src/worker/task-worker.js';
import { DATABASE_URL, urlFor, withSchema } from './lib/postgres.js';

export interface ScaleOutRow {
  scenario: string;
  ours: number;
  reference: number | null;
  unit: string;
  /** ours / reference, or reference / ours for latencies: above 1 means we do better. */
  ratio: number | null;
  budget: string;
}

const CLI = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const DISPATCH_SAMPLES = 200;
const DISPATCH_GAP_MS = 20;
const NOOP_TASKS = 2000;
const CREATE_SECONDS = 8;
/**
 * The creates run under the service's default active-task cap (100 per account, counted at every
 * create on PostgreSQL), spread over enough accounts that none reaches it (2 api processes at
 * 3 000 creates/s for 8 s would give each 94): with the cap raised out of the way, as this
 * scenario did until 2026-11-27, every create counted all of its account's hundreds of queued
 * tasks, which the cap bounds in service.
 */
const CREATE_ACCOUNTS = 256;
const LIST_SMALL = 10_000;
const LIST_LARGE = Number(process.env.BENCH_PG_LIST_SIZE ?? 1_000_000);
const LIST_ROUNDS = 3;
const LIST_ROUND_SECONDS = 4;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/** A generator that makes no image work: one 1×1 PNG, so a task still stores a result row and blob. */
class NoopGenerator implements ImageGenerator {
  readonly name = 'noop';
  onCall: (input: GenerationInput) => void = () => {};
  constructor(private readonly png: Buffer) {}
  async generate(input: GenerationInput): Promise<GeneratedImage[]> {
    this.onCall(input);
    return [{ bytes: this.png, contentType: 'image/png', width: 1, height: 1 }];
  }
}

async function ourWorker(schema: string, concurrency: number, generator: NoopGenerator, dir: string) {
  const store = new PostgresStore({ connectionString: DATABASE_URL, schema, poolSize: concurrency + 4 });
  await store.migrate();
  const events = new TaskEvents();
  await store.listen((signal) =>
    signal.kind === 'created' ? events.taskCreated(signal.model) : events.taskChanged(signal.taskId),
  );
  const blobs = new FsBlobStore(join(dir, 'blobs'));
  const worker = new TaskWorker({
    store,
    blobs,
    backends: [{ name: 'local', generator, slots: concurrency }],
    events,
    leaseMs: 30_000,
    maxAttempts: 3,
    deadlineMs: 3_600_000,
    generationTimeoutMs: 60_000,
    retryBaseMs: 1000,
    pollMs: 2000,
    resultRetentionMs: 3_600_000,
  });
  return { store, worker, blobs };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function startApi(schema: string, dataDir: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'api'], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: urlFor(schema),
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      RATE_LIMIT_CREATES_PER_MIN: '1000000000',
      RATE_LIMIT_REQUESTS_PER_MIN: '1000000000',
      DATABASE_POOL_SIZE: '20',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('"msg":"ready"')) resolve();
    });
    child.once('exit', () => reject(new Error(`api exited:\n${output}`)));
  });
  child.stdout!.resume();
  return { port, child };
}

async function stopAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    }),
  );
}

/**
 * The dispatches' latencies split where the enqueue answered (our create's 202; graphile-worker's
 * add_job resolved): before it, the enqueue itself, which wakes the worker with its commit; after
 * it, what the queue adds (negative when the worker started first). Each list sorted on its own.
 */
interface DispatchTimes {
  latencies: number[];
  enqueueAnswered: number[];
  afterAnswer: number[];
}

/** create (HTTP, through an api process) → our worker's generator called, one at a time. */
async function ourDispatchLatency(png: Buffer): Promise<DispatchTimes> {
  return withSchema(async (schema) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-dispatch-'));
    const generator = new NoopGenerator(png);
    const { store, worker } = await ourWorker(schema, 1, generator, dir);
    const { key } = await createAccountWithKey(store, { name: 'bench', tokens: 1e9, now: new Date() });
    const api = await startApi(schema, dir);
    worker.start();
    const latencies: number[] = [];
    const enqueueAnswered: number[] = [];
    const afterAnswer: number[] = [];
    try {
      for (let i = 0; i < DISPATCH_SAMPLES + 10; i++) {
        const called = new Promise<number>((resolve) => (generator.onCall = () => resolve(performance.now())));
        const sent = performance.now();
        const response = await fetch(`http://127.0.0.1:${api.port}/api/v1/images/generations`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'alpha-pro', prompt: `dispatch ${i}` }),
        });
        const answered = performance.now();
        if (response.status !== 202) throw new Error(`create answered ${response.status}`);
        const at = await called;
        // The first ten warm up both processes.
        if (i >= 10) {
          latencies.push(at - sent);
          enqueueAnswered.push(answered - sent);
          afterAnswer.push(at - answered);
        }
        await new Promise((resolve) => setTimeout(resolve, DISPATCH_GAP_MS));
      }
    } finally {
      await worker.stop(5000);
      await stopAll([api.child]);
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
    return sortedTimes({ latencies, enqueueAnswered, afterAnswer });
  });
}

function sortedTimes(times: DispatchTimes): DispatchTimes {
  for (const list of [times.latencies, times.enqueueAnswered, times.afterAnswer]) list.sort((x, y) => x - y);
  return times;
}

/** add_job → task function started, one at a time, graphile-worker in this process. */
async function graphileDispatchLatency(): Promise<DispatchTimes> {
  return withSchema(async (schema) => {
    let started: (at: number) => void = () => {};
    const runner = await runGraphileWorker({
      connectionString: DATABASE_URL,
      schema,
      concurrency: 1,
      noHandleSignals: true,
      pollInterval: 2000,
      logger: quietLogger(),
      taskList: { noop: async () => started(performance.now()) },
    });
    const utils = await makeWorkerUtils({ connectionString: DATABASE_URL, schema, logger: quietLogger() });
    const latencies: number[] = [];
    const enqueueAnswered: number[] = [];
    const afterAnswer: number[] = [];
    try {
      for (let i = 0; i < DISPATCH_SAMPLES + 10; i++) {
        const called = new Promise<number>((resolve) => (started = resolve));
        const sent = performance.now();
        await utils.addJob('noop', { i });
        const answered = performance.now();
        const at = await called;
        if (i >= 10) {
          latencies.push(at - sent);
          enqueueAnswered.push(answered - sent);
          afterAnswer.push(at - answered);
        }
        await new Promise((resolve) => setTimeout(resolve, DISPATCH_GAP_MS));
      }
    } finally {
      await utils.release();
      await runner.stop();
    }
    return sortedTimes({ latencies, enqueueAnswered, afterAnswer });
  });
}

/**
 * NOOP_TASKS queued tasks run to completion by `slots` worker slots: tasks per second.
 * `beforeStart` sees the worker's store and blob store once the tasks are queued (a tool's timing wrappers).
 */
export async function ourNoopThroughput(
  png: Buffer,
  slots: number,
  beforeStart: (parts: { store: PostgresStore; blobs: FsBlobStore }) => void = () => {},
): Promise<number> {
  return withSchema(async (schema) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-noop-'));
    const generator = new NoopGenerator(png);
    const { store, worker, blobs } = await ourWorker(schema, slots, generator, dir);
    try {
      const now = new Date();
      const account = await store.accounts.createAccount({ id: newIdAt(now), name: 'bench', initialTokens: 1e9, now });
      const tasks = Array.from({ length: NOOP_TASKS }, (_, i) =>
        // A webhook URL, so that each completion also writes its outbox row (no dispatcher runs).
        createTask(
          { model: 'alpha-pro', prompt: `noop ${i}`, webhook_url: 'https://example.com/hook' },
          { accountId: account.id, now, newId: () => newIdAt(now) },
        ),
      );
      for (let i = 0; i < tasks.length; i += 50)
        await Promise.all(
          tasks.slice(i, i + 50).map((task) => store.tasks.insertTaskWithDebit(task, { maxActiveTasks: 1e9 })),
        );
      let completed = 0;
      const done = Promise.withResolvers<void>();
      const complete = store.tasks.completeTask.bind(store.tasks);
      store.tasks.completeTask = async (input) => {
        const ok = await complete(input);
        if (ok && ++completed === NOOP_TASKS) done.resolve();
        return ok;
      };
      beforeStart({ store, blobs });
      const start = performance.now();
      worker.start();
      await done.promise;
      return NOOP_TASKS / ((performance.now() - start) / 1000);
    } finally {
      await worker.stop(5000);
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/**
 * NOOP_TASKS queued graphile-worker jobs run by `concurrency`: jobs per second. `job` is the task
 * function (nothing, by default).
 */
async function graphileNoopThroughput(concurrency: number, job: () => Promise<void> = async () => {}): Promise<number> {
  return withSchema(async (schema) => {
    const utils = await makeWorkerUtils({ connectionString: DATABASE_URL, schema, logger: quietLogger() });
    await utils.migrate();
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(
      `SELECT ${schema}.add_jobs(array_agg(json_populate_record(null::${schema}.job_spec, json_build_object('identifier', 'noop', 'payload', '{}'::json))))
       FROM generate_series(1, $1)`,
      [NOOP_TASKS],
    );
    await client.end();
    let completed = 0;
    const done = Promise.withResolvers<void>();
    // Listened to before the runner starts: it may finish jobs before run() resolves.
    const events: WorkerEvents = new EventEmitter();
    events.on('job:success', () => ++completed === NOOP_TASKS && done.resolve());
    const start = performance.now();
    const runner = await runGraphileWorker({
      connectionString: DATABASE_URL,
      schema,
      concurrency,
      noHandleSignals: true,
      pollInterval: 2000,
      logger: quietLogger(),
      events,
      taskList: { noop: job },
    });
    await done.promise;
    const perSecond = NOOP_TASKS / ((performance.now() - start) / 1000);
    await runner.stop();
    await utils.release();
    return perSecond;
  });
}

/** Creates per second through `apis` api processes, loaded together for CREATE_SECONDS. */
async function ourCreatesPerSecond(apis: number): Promise<number> {
  return withSchema(async (schema) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-creates-'));
    const store = new PostgresStore({ connectionString: DATABASE_URL, schema, poolSize: 2 });
    await store.migrate();
    // Several accounts: one account's creates take turns on its balance row, whatever the processes.
    const keys: string[] = [];
    for (let i = 0; i < CREATE_ACCOUNTS; i++)
      keys.push((await createAccountWithKey(store, { name: `bench ${i}`, tokens: 1e12, now: new Date() })).key);
    let next = 0;
    const servers = [];
    for (let i = 0; i < apis; i++) servers.push(await startApi(schema, dir));
    try {
      const results = await Promise.all(
        servers.map((server) =>
          autocannon({
            url: `http://127.0.0.1:${server.port}/api/v1/images/generations`,
            method: 'POST',
            connections: 32 / apis,
            duration: CREATE_SECONDS,
            body: JSON.stringify({ model: 'alpha-pro', prompt: 'a lighthouse at dawn' }),
            requests: [
              {
                setupRequest: (request) => ({
                  ...request,
                  headers: {
                    authorization: `Bearer ${keys[next++ % keys.length]}`,
                    'content-type': 'application/json',
                  },
                }),
              },
            ],
          }),
        ),
      );
      const non2xx = results.reduce((n, r) => n + r.non2xx, 0);
      if (non2xx > 0) throw new Error(`${non2xx} creates were not 202`);
      return results.reduce((n, r) => n + r['2xx'], 0) / CREATE_SECONDS;
    } finally {
      await stopAll(servers.map((s) => s.child));
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/**
 * Finished tasks of one account, ids UUIDv7-shaped and one millisecond apart (oldest first), both
 * models and every terminal status, as the SQLite list bench seeds them; ANALYZE afterwards, as
 * autovacuum would have by then.
 */
async function seedFinishedTasks(schema: string, accountId: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: urlFor(schema) });
  await client.connect();
  try {
    const start = Date.parse('2026-01-01T00:00:00Z');
    for (let from = 0; from < count; from += 100_000) {
      await client.query(
        `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
           cost, generated, attempt, run_after, created_at, started_at, completed_at)
         SELECT format('%s-%s-7%s-8%s-%s', substr(h, 1, 8), substr(h, 9, 4), substr(r, 1, 3), substr(r, 4, 3), substr(r, 7, 12)),
           $1, (ARRAY['COMPLETED', 'COMPLETED', 'COMPLETED', 'FAILED', 'CANCELED'])[1 + i % 5],
           (ARRAY['alpha-pro', 'beta-v5-pro'])[1 + i % 2], 'seeded task ' || i, '[]', '1:1', '1K', 1024, 1024,
           25, '[]', 1, at, at, at, at
         FROM generate_series($2::int, $3::int - 1) AS i,
           LATERAL (SELECT lpad(to_hex($4::bigint + i), 12, '0') AS h, md5(i::text) AS r,
                           to_timestamp(($4::bigint + i) / 1000.0) AS at) AS made`,
        [accountId, from, Math.min(count, from + 100_000), start],
      );
    }
    await client.query('ANALYZE tasks');
  } finally {
    await client.end();
  }
}

/** The cursor a client holds half way down the account's list (newest first). */
async function cursorHalfWay(schema: string, count: number): Promise<string> {
  const client = new pg.Client({ connectionString: urlFor(schema) });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string }>('SELECT id FROM tasks ORDER BY id DESC OFFSET $1 LIMIT 1', [
      Math.floor(count / 2),
    ]);
    return encodeCursor(rows[0].id);
  } finally {
    await client.end();
  }
}

/**
 * Lists on PostgreSQL: an `api` process on LIST_SMALL stored tasks and one on LIST_LARGE, loaded in
 * alternate rounds (so that drift hits both), first page and a cursor half way down.
 */
async function ourListFlatness(
  log: (line: string) => void,
): Promise<{ depth: string; small: number; large: number }[]> {
  return withSchema((smallSchema) =>
    withSchema(async (largeSchema) => {
      const dir = mkdtempSync(join(tmpdir(), 'bench-lists-'));
      const servers: { port: number; child: ChildProcess }[] = [];
      try {
        const targets = [];
        for (const [schema, count] of [
          [smallSchema, LIST_SMALL],
          [largeSchema, LIST_LARGE],
        ] as const) {
          const store = new PostgresStore({ connectionString: DATABASE_URL, schema, poolSize: 2 });
          await store.migrate();
          const { account, key } = await createAccountWithKey(store, { name: 'lists', tokens: 0, now: new Date() });
          await store.close();
          const started = performance.now();
          await seedFinishedTasks(schema, account.id, count);
          log(`seeded ${count} tasks in ${((performance.now() - started) / 1000).toFixed(1)} s`);
          const server = await startApi(schema, dir);
          servers.push(server);
          targets.push({ port: server.port, key, cursor: await cursorHalfWay(schema, count) });
        }
        const results = [];
        for (const depth of ['first page', 'deep cursor (half way)']) {
          const rps: number[][] = [[], []];
          for (let round = 0; round < LIST_ROUNDS; round++) {
            for (const [i, target] of targets.entries()) {
              const query = depth === 'first page' ? '' : `&cursor=${target.cursor}`;
              const result = await autocannon({
                url: `http://127.0.0.1:${target.port}/api/v1/images/generations?limit=20${query}`,
                headers: { authorization: `Bearer ${target.key}` },
                connections: 16,
                duration: LIST_ROUND_SECONDS,
              });
              if (result.non2xx > 0) throw new Error(`${result.non2xx} list requests were not 200`);
              rps[i].push(result.requests.average);
            }
          }
          const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
          results.push({ depth, small: median(rps[0]), large: median(rps[1]) });
        }
        return results;
      } finally {
        await stopAll(servers.map((s) => s.child));
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}

/** graphile-worker's logger, showing only its errors. */
function quietLogger(): Logger {
  return new Logger((scope) => (level, message) => {
    if (level === 'error') process.stderr.write(`graphile-worker: ${message} ${JSON.stringify(scope)}\n`);
  });
}

export type ScaleOutScenario = 'dispatch' | 'noop' | 'creates' | 'lists';

export async function runScaleOutBench(
  log: (line: string) => void = () => {},
  scenarios: readonly ScaleOutScenario[] = ['dispatch', 'noop', 'creates', 'lists'],
): Promise<ScaleOutRow[]> {
  const png = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#000' } })
    .png()
    .toBuffer();
  const rows: ScaleOutRow[] = [];

  if (scenarios.includes('dispatch')) await dispatchRows(png, rows, log);
  if (scenarios.includes('noop')) await noopRows(png, rows, log);
  if (scenarios.includes('creates')) await createRows(rows, log);
  if (scenarios.includes('lists')) await listRows(rows, log);
  return rows;
}

async function dispatchRows(png: Buffer, rows: ScaleOutRow[], log: (line: string) => void): Promise<void> {
  log('dispatch latency…');
  const ours = await ourDispatchLatency(png);
  const theirs = await graphileDispatchLatency();
  for (const p of [50, 99]) {
    const o = percentile(ours.latencies, p);
    const r = percentile(theirs.latencies, p);
    rows.push({
      scenario: `dispatch latency p${p} (create → generator called; graphile: add_job → task start)`,
      ours: round(o, 2),
      reference: round(r, 2),
      unit: 'ms',
      ratio: round(r / o, 2),
      budget: p === 50 ? 'p50 ≤ graphile-worker p50' : 'p99 ≤ 25 ms',
    });
  }
  // No budget: what the p50 above is made of (docs/performance-history.md, "What the PostgreSQL budgets compare").
  const parts = [
    [
      'enqueueAnswered',
      "dispatch, its first part p50: the enqueue's answer (create → its 202 through an api process; graphile: add_job resolved)",
    ],
    ['afterAnswer', 'dispatch, its second part p50: the enqueue answered → generator called (graphile: task start)'],
  ] as const;
  for (const [part, scenario] of parts) {
    const o = percentile(ours[part], 50);
    const r = percentile(theirs[part], 50);
    rows.push({ scenario, ours: round(o, 2), reference: round(r, 2), unit: 'ms', ratio: round(r / o, 2), budget: '' });
  }
}

async function noopRows(png: Buffer, rows: ScaleOutRow[], log: (line: string) => void): Promise<void> {
  for (const slots of [1, 2, 4]) {
    log(`no-op throughput, ${slots} slots…`);
    const o = await ourNoopThroughput(png, slots);
    const r = await graphileNoopThroughput(slots);
    rows.push({
      scenario: `no-op tasks/s, ${slots} worker slot${slots > 1 ? 's' : ''} (graphile: concurrency ${slots})`,
      ours: round(o, 0),
      reference: round(r, 0),
      unit: 'tasks/s',
      ratio: round(o / r, 2),
      budget: slots === 4 ? '≥ 0.5 × graphile-worker at concurrency 4' : '',
    });
    if (slots === 4) {
      // No budget: graphile-worker's job given the one durable write our no-op task has and its
      // no-op job has not, the result's blob (the same FsBlobStore put of the same PNG), so that
      // the queue's share of the gap can be told from the blob's (docs/performance-history.md, "What the
      // PostgreSQL budgets compare").
      log('no-op throughput, 4 slots, graphile-worker storing the blob…');
      const withBlob = await graphileStoringBlobThroughput(png, slots);
      rows.push({
        scenario: `no-op tasks/s, ${slots} worker slots, beside graphile-worker whose job stores the same result blob (FsBlobStore put)`,
        ours: round(o, 0),
        reference: round(withBlob, 0),
        unit: 'tasks/s',
        ratio: round(o / withBlob, 2),
        budget: '',
      });
    }
  }
}

async function graphileStoringBlobThroughput(png: Buffer, concurrency: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-graphile-blob-'));
  try {
    const blobs = new FsBlobStore(join(dir, 'blobs'));
    return await graphileNoopThroughput(concurrency, async () => {
      await blobs.put(`media/${randomUUID()}`, png);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function createRows(rows: ScaleOutRow[], log: (line: string) => void): Promise<void> {
  log('creates/s through 1 and 2 api processes…');
  const one = await ourCreatesPerSecond(1);
  const two = await ourCreatesPerSecond(2);
  rows.push({
    scenario: 'creates/s, 1 api process',
    ours: round(one, 0),
    reference: null,
    unit: 'creates/s',
    ratio: null,
    budget: '',
  });
  rows.push({
    scenario: 'creates/s, 2 api processes (reference: 1 process)',
    ours: round(two, 0),
    reference: round(one, 0),
    unit: 'creates/s',
    ratio: round(two / one, 2),
    budget: '≥ 1.3 × one process',
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  // npm run bench:scale-out -- creates noop: only the scenarios named.
  const named = process.argv.slice(2) as ScaleOutScenario[];
  const rows = await runScaleOutBench(
    (line) => process.stderr.write(`${line}\n`),
    named.length > 0 ? named : undefined,
  );
  process.stdout.write(
    '| scenario | ours | graphile-worker / reference | ratio (>1 = ours better) | budget |\n|---|---|---|---|---|\n',
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.scenario} | ${r.ours} ${r.unit} | ${r.reference ?? '–'} | ${r.ratio ?? '–'} | ${r.budget} |\n`,
    );
}

async function listRows(rows: ScaleOutRow[], log: (line: string) => void): Promise<void> {
  log(`lists on ${LIST_SMALL} and ${LIST_LARGE} stored tasks…`);
  const size = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000} M` : `${n / 1000} k`);
  for (const { depth, small, large } of await ourListFlatness(log)) {
    rows.push({
      scenario: `list, ${depth}, ${size(LIST_LARGE)} stored tasks (reference: ${size(LIST_SMALL)})`,
      ours: round(large, 0),
      reference: round(small, 0),
      unit: 'req/s',
      ratio: round(large / small, 2),
      budget: `${size(LIST_LARGE)} ≥ 80 % of ${size(LIST_SMALL)}`,
    });
  }
}
