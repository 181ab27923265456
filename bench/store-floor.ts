/**
 * The store's share of a create and of a read, without HTTP: how long the event loop spends in the
 * store per request, measured as `serve` uses it. bench/run.ts sets these against the reference's
 * CPU time per request: the service does at least the reference's work (the same request read and
 * validated, a response written) and the store's, on one thread, so its share of the reference's
 * requests/s is at most reference / (reference + store) whatever its HTTP side costs
 * (BENCHMARKS.md, "Create: where the time goes now"). Prints one JSON object.
 *
 * - create: `insertTaskWithDebit` from 50 concurrent clients with an account each (the batches 50
 *   connections make), group commit and background checkpointer as in `serve`, the CREATED tasks
 *   marked COMPLETED between rounds as in the create scenarios. Wall time: the loop also waits in
 *   COMMIT's sync.
 * - read: `getTask` of one task, as the read scenario reads.
 *
 * The store is the built one in dist/, as the service runs it (`npm run bench` builds first):
 *
 *   npm run build && npx tsx bench/store-floor.ts [--rounds 3] [--seconds 2]
 */
import { parseArgs } from 'node:util';
import { createTask, type TaskRecord } from '../src/core/task.js';
import { newIdAt } from '../src/ids.js';
import { createAccountWithKey } from '../src/services/api-keys.js';
import type { Store } from '../src/store/port.js';
import { REPO_ROOT } from './lib/processes.js';
import { withProbeStore } from './lib/probe.js';
import { drainCreatedTasks } from './lib/seed.js';

const { values: flags } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '2' } } });
const ROUNDS = Number(flags.rounds);
const SECONDS = Number(flags.seconds);
const CLIENTS = 50;
const NO_CAP = { maxActiveTasks: Number.MAX_SAFE_INTEGER };

const newTask = (accountId: string): TaskRecord => {
  const now = new Date();
  return createTask({ model: 'alpha-pro', prompt: 'a lighthouse at dawn, seen from the sea, in watercolour' }, { accountId, now, newId: () => newIdAt(now) });
};

/** µs of the event loop per create: each client creates its next task once its last one resolved. */
async function createUs(store: Store, accounts: string[], seconds: number): Promise<number> {
  let created = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    accounts.map(async (accountId) => {
      while (performance.now() < until) {
        await store.insertTaskWithDebit(newTask(accountId), NO_CAP);
        created++;
      }
    }),
  );
  return ((performance.now() - started) * 1000) / created;
}

async function readUs(store: Store, accountId: string, taskId: string, seconds: number): Promise<number> {
  let read = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  while (performance.now() < until) {
    for (let i = 0; i < 1000; i++) await store.getTask(accountId, taskId);
    read += 1000;
  }
  return ((performance.now() - started) * 1000) / read;
}

const result = await withProbeStore(REPO_ROOT, { checkpointInBackground: { onCheckpointError: (message: string) => console.error(message) } }, async (store, file) => {
  const accounts: string[] = [];
  for (let i = 0; i < CLIENTS; i++) accounts.push((await createAccountWithKey(store, { name: `floor-${i}`, tokens: 1e12, now: new Date() })).account.id);
  const readTask = newTask(accounts[0]);
  await store.insertTaskWithDebit(readTask, NO_CAP);
  await createUs(store, accounts, 1); // warm-up
  await readUs(store, accounts[0], readTask.id, 0.5);
  const perRound = { createUs: [] as number[], readUs: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    drainCreatedTasks(file);
    perRound.createUs.push(Math.round((await createUs(store, accounts, SECONDS)) * 10) / 10);
    perRound.readUs.push(Math.round((await readUs(store, accounts[0], readTask.id, SECONDS / 2)) * 10) / 10);
  }
  return perRound;
});
console.log(JSON.stringify(result));
