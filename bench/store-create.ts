/**
 * The embedded store's part of a create, alone: the task the core makes of the create scenario's
 * body (createTask) written and charged by SqliteStore.insertTaskWithDebit, with no HTTP around it.
 * As in the create scenario: one account per connection, 50 of them, each with one create at a
 * time, so that the group commit batches as it does under the load generator, and the tasks of
 * one round completed before the next; the file in a fresh temp directory with the checkpoints on
 * their own thread, as `serve` opens it. Prints one JSON object: the CPU and wall time per create,
 * median of the rounds. bench/run.ts reads it beside the create scenario: the CPU the store's write
 * takes is CPU no HTTP layer, however lean, can give back.
 *
 *   npx tsx bench/store-create.ts [--connections 50] [--rounds 5] [--creates 20000]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { GenerationRequest } from '../schemas/catalog.js';
import { createTask } from '../src/core/task.js';
import { newIdAt } from '../src/ids.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { median } from './lib/load.js';
import { TEXT_TO_IMAGE } from './lib/requests.js';
import { drainCreatedTasks } from './lib/seed.js';

export interface StoreCreateReport {
  connections: number;
  creates_per_round: number;
  rounds: { cpu_us_per_create: number; wall_us_per_create: number }[];
  /** Medians over the rounds. */
  cpu_us_per_create: number;
  creates_per_sec: number;
}

const { values: flags } = parseArgs({
  options: {
    connections: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '5' },
    creates: { type: 'string', default: '20000' },
  },
});
const connections = Number(flags.connections);
const createsPerRound = Number(flags.creates);
const request = JSON.parse(TEXT_TO_IMAGE) as GenerationRequest;

const dir = await mkdtemp(join(tmpdir(), 'imagegen-store-create-'));
const file = join(dir, 'imagegen.sqlite');
const store = new SqliteStore(file, {
  checkpointInBackground: {
    onCheckpointError: (message) => {
      throw new Error(`checkpoint failed: ${message}`);
    },
  },
});
try {
  await store.migrate();
  const now = new Date();
  const accounts = await Promise.all(
    Array.from({ length: connections }, (_, i) =>
      store.accounts.createAccount({ id: newIdAt(now), name: `c${i}`, initialTokens: 1e12, now }),
    ),
  );

  /** `total` creates, each account's one after another, all accounts at once. */
  const round = async (total: number) => {
    // The previous round's tasks completed, as the scenario drains its service's before each run.
    drainCreatedTasks(file);
    let started = 0;
    const cpuBefore = process.cpuUsage();
    const wallBefore = performance.now();
    await Promise.all(
      accounts.map(async (account) => {
        while (started < total) {
          started++;
          const at = new Date();
          const task = createTask(request, { accountId: account.id, now: at, newId: () => newIdAt(at) });
          // The cap raised, as the create scenario's service has it (no worker drains the tasks).
          await store.tasks.insertTaskWithDebit(task, { maxActiveTasks: Number.MAX_SAFE_INTEGER });
        }
      }),
    );
    const cpu = process.cpuUsage(cpuBefore);
    const wallUs = (performance.now() - wallBefore) * 1000;
    return { cpu_us_per_create: (cpu.user + cpu.system) / total, wall_us_per_create: wallUs / total };
  };

  await round(createsPerRound / 4); // warm-up: the statements compiled, the code optimised
  const rounds = [];
  for (let i = 0; i < Number(flags.rounds); i++) rounds.push(await round(createsPerRound));
  const report: StoreCreateReport = {
    connections,
    creates_per_round: createsPerRound,
    rounds: rounds.map((r) => ({
      cpu_us_per_create: Math.round(r.cpu_us_per_create * 10) / 10,
      wall_us_per_create: Math.round(r.wall_us_per_create * 10) / 10,
    })),
    cpu_us_per_create: Math.round(median(rounds.map((r) => r.cpu_us_per_create)) * 10) / 10,
    creates_per_sec: Math.round(1e6 / median(rounds.map((r) => r.wall_us_per_create))),
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await store.close();
  await rm(dir, { recursive: true, force: true });
}
