/**
 * The embedded store's part of a create (as bench/store-create.ts measures it), for several built
 * checkouts in alternating rounds of one process: an A/B of the store alone, without HTTP, whose
 * figures a loaded machine moves far less than the service's (BENCHMARKS.md, "The create's cost
 * after the business API, taken apart"). Each checkout gets a store of its own (its own schema and
 * code), 50 accounts with a key each, plain or scoped (the body's model and a monthly token budget
 * it never reaches; a checkout from before scoped keys gets plain keys), and each account makes one
 * create at a time through `insertTaskWithDebit`, with the key as the service passes it. Between
 * rounds the CREATED tasks are completed, through the checkout's own copy of SQLite (two copies in
 * one process on one file would break SQLite's locks). Prints the CPU µs per create of each round.
 *
 *   npx tsx bench/store-create-ab.ts --roots /tmp/imagegen-ab-<rev>,. [--keys plain|scoped]
 *                                    [--rounds 6] [--creates 10000]
 *
 * A root is a checkout with `dist` built and `node_modules` installed (bench:ab's temporary
 * worktrees are; `.` is this tree after `npm run build`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { KeyScope } from '../src/core/key-scope.js';
import { median } from './lib/load.js';
import { TEXT_TO_IMAGE } from './lib/requests.js';

const { values: flags } = parseArgs({
  options: {
    roots: { type: 'string', default: '.' },
    keys: { type: 'string', default: 'plain' },
    rounds: { type: 'string', default: '6' },
    creates: { type: 'string', default: '10000' },
    connections: { type: 'string', default: '50' },
  },
});
const request = JSON.parse(TEXT_TO_IMAGE) as { model: string };
const SCOPE: KeyScope = {
  models: [request.model],
  tokenBudget: { tokens: 1e15, period: 'month' },
  rateLimits: { createsPerMin: null, requestsPerMin: null },
  expiresAt: null,
};

interface Client {
  accountId: string;
  key: { id: string; scope: unknown };
}
interface Checkout {
  name: string;
  dir: string;
  /** Another checkout's store, of its own version's types: what this script calls of it. */
  store: { tasks: { insertTaskWithDebit(task: unknown, limits: object): Promise<void> }; close(): Promise<void> };
  createTask: (request: unknown, context: object) => unknown;
  newIdAt: (at: Date) => string;
  clients: Client[];
  drain: () => void;
}

async function open(root: string): Promise<Checkout> {
  const [{ SqliteStore }, { createTask }, { newIdAt }, keys] = await Promise.all([
    import(join(root, 'dist/src/store/sqlite/sqlite-store.js')),
    import(join(root, 'dist/src/core/task.js')),
    import(join(root, 'dist/src/ids.js')),
    import(join(root, 'dist/src/services/api-keys.js')),
  ]);
  const dir = await mkdtemp(join(tmpdir(), 'imagegen-store-create-ab-'));
  const file = join(dir, 'imagegen.sqlite');
  const store = new SqliteStore(file, {
    checkpointInBackground: {
      onCheckpointError: (message: string) => {
        throw new Error(`checkpoint failed: ${message}`);
      },
    },
  });
  await store.migrate();
  const now = new Date();
  const scoped = flags.keys === 'scoped' && keys.issueApiKey.length >= 5;
  const clients: Client[] = [];
  for (let i = 0; i < Number(flags.connections); i++) {
    const account = await store.accounts.createAccount({ id: newIdAt(now), name: `c${i}`, initialTokens: 1e12, now });
    const issued = await keys.issueApiKey(store, account.id, `k${i}`, now, ...(scoped ? [SCOPE] : []));
    clients.push({ accountId: account.id, key: { id: issued.record.id, scope: issued.record.scope } });
  }
  const Database = createRequire(join(root, 'package.json'))('better-sqlite3');
  const drain = () => {
    const db = new Database(file);
    try {
      const at = Date.now();
      db.prepare(
        "UPDATE tasks SET status = 'COMPLETED', attempt = 1, started_at = ?, completed_at = ? WHERE status = 'CREATED'",
      ).run(at, at);
      const columns = (db.prepare('PRAGMA table_info(accounts)').all() as { name: string }[]).map((c) => c.name);
      if (columns.includes('active_tasks')) db.prepare('UPDATE accounts SET active_tasks = 0').run();
    } finally {
      db.close();
    }
  };
  return { name: basename(resolve(root)), dir, store, createTask, newIdAt, clients, drain };
}

/** `total` creates, each client's one after another, all clients at once: CPU µs per create. */
async function round(checkout: Checkout, total: number): Promise<number> {
  checkout.drain();
  let started = 0;
  const before = process.cpuUsage();
  await Promise.all(
    checkout.clients.map(async (client) => {
      while (started < total) {
        started++;
        const at = new Date();
        const task = checkout.createTask(request, {
          accountId: client.accountId,
          now: at,
          newId: () => checkout.newIdAt(at),
          keyId: client.key.id,
        });
        await checkout.store.tasks.insertTaskWithDebit(task, {
          maxActiveTasks: Number.MAX_SAFE_INTEGER,
          key: client.key,
        });
      }
    }),
  );
  const cpu = process.cpuUsage(before);
  return Math.round(((cpu.user + cpu.system) / total) * 10) / 10;
}

const checkouts: Checkout[] = [];
for (const root of flags.roots.split(',')) checkouts.push(await open(resolve(root)));
try {
  const creates = Number(flags.creates);
  for (const checkout of checkouts) await round(checkout, creates / 4); // warm-up
  const rounds = new Map<string, number[]>(checkouts.map((c) => [c.name, []]));
  for (let r = 0; r < Number(flags.rounds); r++)
    for (let i = 0; i < checkouts.length; i++) {
      const checkout = checkouts[(i + r) % checkouts.length];
      rounds.get(checkout.name)?.push(await round(checkout, creates));
    }
  for (const [name, cpu] of rounds)
    process.stdout.write(
      `${flags.keys} keys  ${name.padEnd(30)} ${Math.round(median(cpu) * 10) / 10} µs CPU per create (rounds: ${cpu.join(', ')})\n`,
    );
} finally {
  for (const checkout of checkouts) {
    await checkout.store.close();
    await rm(checkout.dir, { recursive: true, force: true });
  }
}
