import { setTimeout as delay } from 'node:timers/promises';
import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import type { BlobAdapterUnderTest } from '../helpers/blobs.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { noisyImage } from '../helpers/images.js';
import { s3BehindCuttingProxy } from '../helpers/s3.js';
import { assertOnlyServedOrUnavailable, describe, startSteadyLoad, viaInject } from '../helpers/steady-load.js';
import { testWorker } from '../helpers/worker.js';

/**
 * The S3 store away for 4 s (s3rver behind a loopback proxy that resets and refuses its
 * connections) while three accounts create, upload and read and a worker finishes their tasks:
 * uploads 503 with Retry-After (never 500 or 400), creates and reads served, /readyz names the
 * blob store; once it is back, uploads succeed without a restart and every accepted task ends
 * COMPLETED (none FAILED), each charged once. (One task held past its deadline:
 * test/worker/storage-outage.test.ts.)
 */

// Long enough to outlast what a task may spend on failed attempts (its three attempts, 250 and
// 500 ms apart here, would all fail within a second if a blob-store failure used one up), and
// what a few seconds of load brings in; longer only made the test slower (10 s took 20).
const OUTAGE_MS = 4_000;

t.test('S3 away 4 s under load: uploads 503, every accepted task COMPLETED, balances exact', async (t) => {
  const { proxy, blobs } = await s3BehindCuttingProxy(t);
  const s3BehindProxy: BlobAdapterUnderTest = {
    kind: 's3',
    open: async () => ({ blobs, env: {}, storedKeys: async () => [] }),
  };
  const { app, store, newAccount } = await buildTestApp(
    t,
    { MAX_ACTIVE_TASKS: '100000' },
    { blobAdapter: s3BehindProxy },
  );
  const worker = testWorker(t, { store, blobs }, { concurrency: 2, retryBaseMs: 250 });
  worker.start();
  const accounts = await Promise.all([newAccount(1_000_000), newAccount(1_000_000), newAccount(1_000_000)]);
  const png = await noisyImage(64, 64).png().toBuffer();
  // A create, an upload and two reads per account every ~4 × 50 ms: a few creates a second.
  const load = startSteadyLoad(viaInject(app), accounts, {
    png,
    paceMs: 50,
    kinds: ['create', 'upload', 'read', 'read'],
  });
  t.teardown(() => load.stop());
  await load.until(() => load.count('upload', 201) >= 3 && load.count('create', 202) >= 3);

  proxy.cut(OUTAGE_MS);
  const outageEnds = Date.now() + OUTAGE_MS;
  await load.until(() => load.count('upload', 503) >= 3);
  const readyz = await app.inject({ method: 'GET', url: '/readyz' });
  t.equal(readyz.statusCode, 503);
  t.match(readyz.json(), { status: 'unavailable', checks: { blobs: 'failing', store: 'ok' } });
  // The load goes on for the whole outage (its length is the fault's, not an assertion).
  await delay(Math.max(0, outageEnds - Date.now()));
  const duringOutage = describe(load.report);
  const uploads = load.count('upload', 201);
  await load.until(() => load.count('upload', 201) >= uploads + 3, 20_000);
  t.pass('uploads succeed again once S3 is back, without a restart');
  const report = await load.stop();
  t.comment(`answers up to the end of the outage: ${duringOutage}`);
  assertOnlyServedOrUnavailable(t, report);
  t.equal(load.count('create', 503) + load.count('read', 503), 0, 'creates and reads do not need the blob store');
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again');

  const accepted = [...report.accepted.values()].flat();
  const deadline = Date.now() + 45_000;
  let statuses: (string | undefined)[] = [];
  do {
    statuses = (await Promise.all(accepted.map((id) => store.tasks.getTaskById(id)))).map((task) => task?.status);
    if (statuses.every((status) => status === 'COMPLETED' || status === 'FAILED')) break;
    await delay(100);
  } while (Date.now() < deadline);
  const byStatus = Object.fromEntries(
    [...new Set(statuses)].map((status) => [String(status), statuses.filter((s) => s === status).length]),
  );
  t.same(byStatus, { COMPLETED: accepted.length }, `all ${accepted.length} accepted tasks COMPLETED, none FAILED`);
  for (const { accountId } of accounts) {
    t.equal((await store.accounts.ledgerTotals(accountId)).refund, 0, 'nothing refunded');
    t.equal(
      (await store.accounts.ledgerTotals(accountId)).debit,
      report.accepted.get(accountId)!.length * 25,
      'each debited once',
    );
    await assertLedgerInvariant(t, store, accountId);
  }
});
