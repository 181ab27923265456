import { setTimeout as delay } from 'node:timers/promises';
import t from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { noisyImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { postgresTestUrl } from '../helpers/postgres.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import {
  assertOnlyServedOrUnavailable,
  retryRefusedCreates,
  startSteadyLoad,
  viaFetch,
} from '../helpers/steady-load.js';
import { needsStore } from '../helpers/store.js';

/**
 * Decision 0019, what it must show: every PostgreSQL connection of an API-only `serve` and a `worker` reset 20
 * times while three accounts create, upload and read (a loopback proxy between the processes and
 * the server). Neither process exits, clients get a success or 503 with Retry-After (never 500 or
 * 400), and afterwards every accepted task completes, charged once. The worker's /readyz and
 * `imagegen_dependency_up` say `store` failing while PostgreSQL is away, ok once it is back.
 */

t.test(
  '20 cuts of every PostgreSQL connection under load: serve and worker live on, no 500, every 202 completes',
  await needsStore('postgres'),
  async (t) => {
    const target = new URL(postgresTestUrl());
    const proxy = await startCuttingProxy(t, { host: target.hostname, port: Number(target.port || 5432) });
    const { url, store: direct } = await clusterDatabase(t);
    const proxied = new URL(url);
    proxied.host = proxy.address;

    const accounts = await Promise.all(
      ['cuts-a', 'cuts-b', 'cuts-c'].map(async (name) => {
        const { key, account } = await createAccountWithKey(direct, { name, tokens: 100_000, now: new Date() });
        return { accountId: account.id, auth: { authorization: `Bearer ${key}` } };
      }),
    );

    const env = {
      DATABASE_URL: proxied.toString(),
      DATA_DIR: t.testdir({}),
      LONG_POLL_FALLBACK_MS: '200',
      // A claim whose answer a cut lost leaves its task leased to a worker that never heard of it,
      // until the lease runs out: 5 s here rather than the default 30 s, or one such cut alone
      // made this test take 36 s instead of 9.
      TASK_LEASE_MS: '5000',
    };
    const [port, workerPort] = [await freePort(), await freePort()];
    const api = startCli(t, ['serve'], { ...env, WORKER_CONCURRENCY: '0', PORT: String(port), HOST: '127.0.0.1' });
    const worker = startCli(t, ['worker'], {
      ...env,
      WORKER_CONCURRENCY: '2',
      WORKER_METRICS_PORT: String(workerPort),
      HOST: '127.0.0.1',
    });
    await Promise.all([
      api.printed('"msg":"ready"'),
      // A worker whose metrics port is taken logs it and works on without /readyz, which this test reads.
      worker.printed('"msg":"worker metrics listening"', { failOn: '"msg":"worker metrics not served' }),
    ]);
    const base = `http://127.0.0.1:${port}`;
    const workerBase = `http://127.0.0.1:${workerPort}`;
    const workerReadyz = async () => {
      const response = await fetch(`${workerBase}/readyz`);
      return { status: response.status, body: await response.json() };
    };
    const workerStoreUp = async () =>
      /imagegen_dependency_up\{dependency="store"\} (\d)/.exec(
        await (await fetch(`${workerBase}/metrics`)).text(),
      )?.[1];
    t.same(await workerReadyz(), {
      status: 200,
      body: { status: 'ok', checks: { store: 'ok', blobs: 'ok', disk: 'ok' } },
    });
    t.equal(await workerStoreUp(), '1');

    const png = await noisyImage(48, 48).png().toBuffer();
    const load = startSteadyLoad(viaFetch(base), accounts, { png, paceMs: 30, prefix: 'cut' });
    t.teardown(() => load.stop());
    await load.until(() => load.count('create', 202) >= 3);
    for (let cut = 0; cut < 20; cut++) {
      // Between two cuts, a few requests of the load answered (served or 503).
      const answered = load.total();
      await load.until(() => load.total() >= answered + 6);
      proxy.cut(cut % 4 === 3 ? 300 : 0);
    }
    // The last cut held: the worker's own readiness names the store.
    proxy.cut(60_000);
    const away = await workerReadyz();
    t.match(away, { status: 503, body: { status: 'unavailable', checks: { store: 'failing', blobs: 'ok' } } });
    t.equal(await workerStoreUp(), '0', 'imagegen_dependency_up{dependency="store"} 0 while PostgreSQL is away');
    const apiAway = await fetch(`${base}/readyz`);
    t.equal(apiAway.status, 503, 'the API unready too');
    t.match(await apiAway.json(), { checks: { store: 'failing' } });
    proxy.cut(0);
    const creates = load.count('create', 202);
    await load.until(() => load.count('create', 202) >= creates + 3);
    const report = await load.stop();

    t.equal(api.exitCode, null, 'serve is still running');
    t.equal(worker.exitCode, null, 'the worker is still running');
    assertOnlyServedOrUnavailable(t, report);
    t.ok(load.count('upload', 201) > 0 && load.count('read', 200) > 0, 'uploads and reads served between the cuts');

    t.equal((await fetch(`${base}/readyz`)).status, 200, 'the API ready again');
    t.same(await workerReadyz(), {
      status: 200,
      body: { status: 'ok', checks: { store: 'ok', blobs: 'ok', disk: 'ok' } },
    });
    t.equal(await workerStoreUp(), '1');
    // Each refused create retried with its key: a new task, or the one its attempt made after all
    // (its answer lost with the connection), never a second one for the key.
    const retried = await retryRefusedCreates(viaFetch(base), accounts, report);
    t.same(retried.failures, [], 'every refused create served on its retry');
    t.comment(
      `${[...retried.tasks.values()].flat().length} refused creates retried; ${retried.inProgressAnswers} answers 409 (key in progress) meanwhile`,
    );
    const accepted = [...report.accepted.values(), ...retried.tasks.values()].flat();
    let unfinished = accepted.length;
    for (let i = 0; i < 600 && unfinished > 0; i++) {
      await delay(100);
      const tasks = await Promise.all(accepted.map((id) => direct.tasks.getTaskById(id)));
      unfinished = tasks.filter((task) => task?.status !== 'COMPLETED').length;
    }
    t.equal(
      unfinished,
      0,
      `all ${accepted.length} tasks (accepted, or made by a refused create and replayed) completed`,
    );
    for (const { accountId } of accounts) {
      const tasks = [...report.accepted.get(accountId)!, ...retried.tasks.get(accountId)!];
      t.equal(new Set(tasks).size, tasks.length, 'no task answered for two keys');
      t.equal(
        (await direct.accounts.ledgerTotals(accountId)).debit,
        tasks.length * 25,
        `${tasks.length} tasks, each debited once`,
      );
      await assertLedgerInvariant(t, direct, accountId);
    }
  },
);
