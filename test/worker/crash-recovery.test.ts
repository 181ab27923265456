import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { spawnTsChild, waitForOutput } from '../helpers/processes.js';
import { insertTask, newAccountWithTokens, openTestRuntime, testWorker } from '../helpers/worker.js';

const hangingWorker = fileURLToPath(new URL('../fixtures/hanging-worker.ts', import.meta.url));

t.test(
  'a worker process killed with SIGKILL mid-task: the task is claimed again, completes once, is charged once',
  async (t) => {
    const deps = await openTestRuntime(t);
    const accountId = await newAccountWithTokens(deps.store, 100);
    const task = await insertTask(deps.store, accountId);
    const leaseMs = 2000;

    const child = spawnTsChild(t, hangingWorker, [deps.dir, String(leaseMs)], { ...process.env, ...deps.storeEnv });
    await waitForOutput(child, 'started');
    const claimed = await deps.store.tasks.getTaskById(task.id);
    t.equal(claimed?.status, 'IN_PROGRESS', 'the child holds the task');
    t.equal(claimed?.attempt, 1);

    child.kill('SIGKILL');
    const [, signal] = await once(child, 'exit');
    t.equal(signal, 'SIGKILL');

    // The rescuer's clock runs ahead so that the dead worker's lease has expired without waiting.
    const rescuer = testWorker(t, deps, { now: () => new Date(Date.now() + leaseMs * 2) });
    t.equal(await rescuer.runOnce(), true);

    const done = await deps.store.tasks.getTaskById(task.id);
    t.equal(done?.status, 'COMPLETED');
    t.equal(done?.attempt, 2, 'the second attempt finished it');
    t.equal(done?.generated.length, 1, 'one result, not two');
    const totals = await deps.store.accounts.ledgerTotals(accountId);
    t.same([totals.debit, totals.refund], [25, 0], 'charged once, no refund');
    await assertLedgerInvariant(t, deps.store, accountId);
  },
);
