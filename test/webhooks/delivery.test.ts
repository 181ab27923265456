import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import { loadConfig } from '../../src/config.js';
import { HmacMediaUrlSigner } from '../../src/services/media-url-signer.js';
import type { Store } from '../../src/store/port.js';
import { WebhookDispatcher } from '../../src/worker/webhook-dispatcher.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';
import { buildTestApp, fileTestApp, TEST_MEDIA_SIGNING_SECRET, type TestApp } from '../helpers/app.js';
import { testWorker } from '../helpers/worker.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on loopback answering with the scripted statuses in turn (the last repeats). */
async function startReceiver(t: Test, statuses: number[], extraHeaders: Record<string, string> = {}) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body });
      const status = statuses[Math.min(received.length - 1, statuses.length - 1)];
      res.writeHead(status, extraHeaders).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return { received, url: `http://127.0.0.1:${port}/hooks`, port };
}

type SetupOptions = { allowPrivate?: boolean; lookup?: LookupAll };

/**
 * The file's app. The task worker and the webhook dispatcher a test runs claim work across every
 * account of the store, not the test's own: the tests on this app each leave every task and every
 * delivery of theirs terminal (none waiting for a claim), so that no test's worker or dispatcher
 * meets another's. A test that leaves a delivery pending, or that needs another configuration,
 * builds an app of its own (`ownApp`).
 */
const ctx = fileTestApp({ WEBHOOK_ALLOW_PRIVATE: 'true' });
const setup = (t: Test) => onApp(t, ctx());

/** An app of the test's own. */
async function ownApp(t: Test, options: SetupOptions = {}) {
  const env = { WEBHOOK_ALLOW_PRIVATE: String(options.allowPrivate ?? true) };
  return onApp(t, await buildTestApp(t, env, { webhookLookup: options.lookup }), options);
}

/** An account of the test's own on `harness`, and the test's dispatcher, tasks, secret and log. */
async function onApp(t: Test, harness: TestApp, options: SetupOptions = {}) {
  const { auth, accountId } = await harness.newAccount(1000);
  const store = harness.store;
  // Each reading of the dispatcher's clock is at least a second after the last (and never behind
  // the real clock), so the shrunken retry delays are always over by the next claim.
  let clock = Date.now();
  const makeDispatcher = (
    overrides: {
      lookup?: LookupAll;
      allowPrivate?: boolean;
      storeOverride?: Store;
      now?: () => Date;
      retryScale?: number;
    } = {},
  ) =>
    new WebhookDispatcher({
      store: overrides.storeOverride ?? store,
      signer: new HmacMediaUrlSigner(TEST_MEDIA_SIGNING_SECRET, 'http://127.0.0.1:3000', 3600),
      allowPrivate: overrides.allowPrivate ?? options.allowPrivate ?? true,
      lookup: overrides.lookup,
      timeoutMs: 2000,
      retryScale: overrides.retryScale ?? 0.000001,
      leaseMs: 60_000,
      pollMs: 10,
      concurrency: 1,
      random: () => 0.5,
      now:
        overrides.now ??
        (() => {
          clock = Math.max(Date.now(), clock + 1000);
          return new Date(clock);
        }),
    });
  const createTask = async (webhookUrl: string) => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a red kite over the sea', webhook_url: webhookUrl },
    });
    t.equal(response.statusCode, 202, 'task created');
    return response.json().data.task_id as string;
  };
  const secret = async () => {
    const response = await harness.app.inject({ url: '/api/v1/webhooks/secret', headers: auth });
    return response.json().data.secret as string;
  };
  const deliveries = async (query = '') =>
    (await harness.app.inject({ url: `/api/v1/webhooks/deliveries${query}`, headers: auth })).json();
  return { ...harness, auth, accountId, store, makeDispatcher, createTask, secret, deliveries };
}

/** Runs the dispatcher until nothing is due (bounded), as a process loop would. */
async function drain(dispatcher: WebhookDispatcher, maxRounds = 50) {
  for (let round = 0; round < maxRounds; round++) {
    if (!(await dispatcher.runOnce())) {
      await new Promise((resolve) => setImmediate(resolve));
      if (!(await dispatcher.runOnce())) return;
    }
  }
}

t.test('a completed task posts one signed event that verifies with the standardwebhooks package', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [200]);
  const taskId = await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  await drain(h.makeDispatcher());

  t.equal(receiver.received.length, 1);
  const [event] = receiver.received;
  const payload = JSON.parse(event.body);
  t.equal(payload.type, 'image.generation.completed');
  t.equal(payload.data.task_id, taskId);
  t.equal(payload.data.status, 'COMPLETED');
  t.equal(payload.data.generated.length, 1);
  t.match(payload.timestamp, /^\d{4}-\d\d-\d\dT/);

  const verifier = new Webhook(await h.secret());
  const headers = {
    'webhook-id': String(event.headers['webhook-id']),
    'webhook-timestamp': String(event.headers['webhook-timestamp']),
    'webhook-signature': String(event.headers['webhook-signature']),
  };
  t.doesNotThrow(() => verifier.verify(event.body, headers), 'the signature verifies');
  const flipped = event.body.replace('COMPLETED', 'COMPLETEE');
  t.throws(() => verifier.verify(flipped, headers), 'a changed body fails');
  t.throws(
    () => verifier.verify(event.body, { ...headers, 'webhook-id': `${headers['webhook-id']}x` }),
    'a changed id fails',
  );
  t.throws(
    () =>
      verifier.verify(event.body, {
        ...headers,
        'webhook-timestamp': String(Number(headers['webhook-timestamp']) - 1),
      }),
    'a changed timestamp fails',
  );

  const log = await h.deliveries();
  t.equal(log.data.length, 1);
  t.match(log.data[0], {
    delivery_id: headers['webhook-id'],
    task_id: taskId,
    status: 'delivered',
    event_type: 'image.generation.completed',
  });
  t.same(
    log.data[0].attempts.map((a: { status_code: number }) => a.status_code),
    [200],
  );
});

t.test('500 twice then 200: three attempts with the same webhook-id, each logged', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [500, 500, 200]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  await drain(h.makeDispatcher());

  t.equal(receiver.received.length, 3);
  t.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 1, 'same webhook-id on every attempt');
  const [delivery] = (await h.deliveries()).data;
  t.equal(delivery.status, 'delivered');
  t.same(
    delivery.attempts.map((a: { status_code: number }) => a.status_code),
    [500, 500, 200],
  );
  t.equal(delivery.next_attempt_at, null);
});

t.test('a 302 is a failure and is not followed', async (t) => {
  // An app of its own: the delivery is left pending, scheduled for a retry.
  const h = await ownApp(t);
  const target = await startReceiver(t, [200]);
  const redirecting = await startReceiver(t, [302], { location: target.url });
  await h.createTask(redirecting.url);
  await testWorker(t, h).runOnce();
  await h.makeDispatcher().runOnce();

  t.equal(redirecting.received.length, 1);
  t.equal(target.received.length, 0, 'the redirect target was never requested');
  const [delivery] = (await h.deliveries()).data;
  t.equal(delivery.status, 'pending', 'scheduled for a retry');
  t.match(delivery.attempts[0], { status_code: 302, error: 'HTTP 302' });
});

t.test('410 Gone stops retrying', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [410]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  await drain(h.makeDispatcher());
  t.equal(receiver.received.length, 1);
  const [delivery] = (await h.deliveries('?status=failed')).data;
  t.equal(delivery.status, 'failed');
  t.equal(delivery.next_attempt_at, null);
});

t.test('a receiver that keeps failing gets the whole schedule (10 attempts), then the delivery fails', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [503]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  // Each reading of its clock is 25 h after the last, so every scheduled retry (at most 24 h) is due.
  let clock = Date.now();
  await drain(
    h.makeDispatcher({
      now: () => {
        clock += 25 * 3600_000;
        return new Date(clock);
      },
    }),
    100,
  );
  t.equal(receiver.received.length, 10);
  const [delivery] = (await h.deliveries()).data;
  t.equal(delivery.status, 'failed');
  t.equal(delivery.attempts.length, 10);
});

t.test('a canceled task sends image.generation.canceled', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [204]);
  const taskId = await h.createTask(receiver.url);
  const cancel = await h.app.inject({
    method: 'POST',
    url: `/api/v1/images/generations/${taskId}/cancel`,
    headers: h.auth,
  });
  t.equal(cancel.statusCode, 200);
  await drain(h.makeDispatcher());
  t.equal(JSON.parse(receiver.received[0].body).type, 'image.generation.canceled');
  t.equal(JSON.parse(receiver.received[0].body).data.status, 'CANCELED');
});

t.test(
  'a worker that dies after the terminal state but before delivery: the event is delivered after restart',
  async (t) => {
    const h = await setup(t);
    const receiver = await startReceiver(t, [200]);
    await h.createTask(receiver.url);
    // The task worker finishes the task; no dispatcher ran in that "process" before it died.
    await testWorker(t, h).runOnce();
    t.equal(receiver.received.length, 0);
    t.equal((await h.deliveries()).data[0].status, 'pending', 'the event waits in the outbox');

    const restarted = await h.reopenStore();
    await drain(h.makeDispatcher({ storeOverride: restarted }));
    t.equal(receiver.received.length, 1, 'delivered by the restarted process');
  },
);

t.test('a delivery can be replayed with the same webhook-id', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [200]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  const dispatcher = h.makeDispatcher();
  await drain(dispatcher);
  const [delivery] = (await h.deliveries()).data;

  const replay = await h.app.inject({
    method: 'POST',
    url: `/api/v1/webhooks/deliveries/${delivery.delivery_id}/retry`,
    headers: h.auth,
  });
  t.equal(replay.statusCode, 202);
  t.equal(replay.json().data.status, 'pending');
  await drain(dispatcher);
  t.equal(receiver.received.length, 2);
  t.equal(receiver.received[1].headers['webhook-id'], delivery.delivery_id);

  const other = await h.newAccount(10);
  const foreign = await h.app.inject({
    method: 'POST',
    url: `/api/v1/webhooks/deliveries/${delivery.delivery_id}/retry`,
    headers: other.auth,
  });
  t.equal(foreign.statusCode, 404, 'another account cannot replay it');
});

t.test('deliveries are listed newest first, a page at a time, and by task', async (t) => {
  // An app of its own: no dispatcher runs, so the three deliveries are left pending.
  const h = await ownApp(t);
  const receiver = await startReceiver(t, [200]);
  const taskIds: string[] = [];
  for (let i = 0; i < 3; i++) {
    taskIds.push(await h.createTask(receiver.url));
    await testWorker(t, h).runOnce();
  }
  const first = await h.deliveries('?limit=2');
  t.same(
    first.data.map((d: { task_id: string }) => d.task_id),
    [taskIds[2], taskIds[1]],
    'newest first',
  );
  t.type(first.next_cursor, 'string');
  const second = await h.deliveries(`?limit=2&cursor=${first.next_cursor}`);
  t.same(
    second.data.map((d: { task_id: string }) => d.task_id),
    [taskIds[0]],
    'the rest',
  );
  t.equal(second.next_cursor, null);
  const byTask = await h.deliveries(`?task_id=${taskIds[1]}`);
  t.same(
    byTask.data.map((d: { task_id: string }) => d.task_id),
    [taskIds[1]],
  );
  t.equal(byTask.next_cursor, null);
});

t.test('after a secret rotation both secrets sign, and each verifies', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [200]);
  const oldSecret = await h.secret();
  const rotated = await h.app.inject({ method: 'POST', url: '/api/v1/webhooks/secret/rotate', headers: h.auth });
  const newSecret = rotated.json().data.secret;
  t.not(newSecret, oldSecret);
  t.ok(rotated.json().data.previous_secret_expires_at);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  await drain(h.makeDispatcher());

  const [event] = receiver.received;
  const signatures = String(event.headers['webhook-signature']).split(' ');
  t.equal(signatures.length, 2);
  const headers = {
    'webhook-id': String(event.headers['webhook-id']),
    'webhook-timestamp': String(event.headers['webhook-timestamp']),
  };
  for (const secret of [oldSecret, newSecret]) {
    t.doesNotThrow(() =>
      new Webhook(secret).verify(event.body, {
        ...headers,
        'webhook-signature': event.headers['webhook-signature'] as string,
      }),
    );
  }
});

t.test('a loopback webhook_url is refused at create when private targets are not allowed', async (t) => {
  // An app of its own: private targets are not allowed.
  const h = await ownApp(t, { allowPrivate: false });
  const response = await h.app.inject({
    method: 'POST',
    url: '/api/v1/images/generations',
    headers: h.auth,
    payload: { model: 'alpha-pro', prompt: 'a red kite', webhook_url: 'https://127.0.0.1/hook' },
  });
  t.equal(response.statusCode, 400);
  t.match(response.json(), { code: 'invalid_request', errors: [{ pointer: '/webhook_url', location: 'body' }] });
  t.equal((await h.store.accounts.ledgerTotals(h.accountId)).debit, 0, 'nothing was charged');
});

t.test(
  'a name that resolves to a public address at create but to loopback at send time is refused at connect',
  async (t) => {
    const receiver = await startReceiver(t, [200]);
    const publicAtCreate: LookupAll = async () => [{ address: '93.184.216.34', family: 4 }];
    // An app of its own: private targets are not allowed, names resolve as the test says, and the
    // refused delivery is left pending.
    const h = await ownApp(t, { allowPrivate: false, lookup: publicAtCreate });
    // http is refused at create without allowPrivate, so the check is made on an https URL; the
    // rebinding proof is the connect-time refusal below, made before any connection is opened.
    await h.createTask(`https://hooks.example.test:${receiver.port}/hooks`);
    await testWorker(t, h).runOnce();
    const loopbackAtSend: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
    await h.makeDispatcher({ allowPrivate: false, lookup: loopbackAtSend }).runOnce();

    t.equal(receiver.received.length, 0, 'nothing reached the loopback receiver');
    const [delivery] = (await h.deliveries()).data;
    t.equal(delivery.attempts[0].status_code, null);
    t.match(delivery.attempts[0].error, /not allowed|private|refused/i);
  },
);

t.test('config: the webhook retry scale must be in (0, 1]', async (t) => {
  t.throws(() => loadConfig({ WEBHOOK_RETRY_SCALE: '0' }), /WEBHOOK_RETRY_SCALE/);
  t.equal(loadConfig({ WEBHOOK_RETRY_SCALE: '0.5' }).WEBHOOK_RETRY_SCALE, 0.5);
});

t.test('a manual retry that fails leaves the retry schedule where it was', async (t) => {
  // An app of its own: the delivery is left pending, its third attempt scheduled.
  const h = await ownApp(t);
  const receiver = await startReceiver(t, [500]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  let clock = Date.now();
  const dispatcher = h.makeDispatcher({ retryScale: 1, now: () => new Date(clock) });

  await dispatcher.runOnce(); // the first, immediate attempt fails: the second is due 5 s later
  const [afterFirst] = (await h.deliveries()).data;
  t.equal(Date.parse(afterFirst.next_attempt_at) - clock, 5_000);

  const retried = await h.app.inject({
    method: 'POST',
    url: `/api/v1/webhooks/deliveries/${afterFirst.delivery_id}/retry`,
    headers: h.auth,
  });
  t.equal(retried.statusCode, 202);
  clock = Date.now() + 1; // the manual retry is due at once
  t.equal(await dispatcher.runOnce(), true);
  const [afterManual] = (await h.deliveries()).data;
  t.equal(afterManual.attempts.length, 2);
  t.equal(afterManual.status, 'pending');
  t.equal(
    afterManual.next_attempt_at,
    afterFirst.next_attempt_at,
    'the scheduled second attempt is still next, not a later slot',
  );

  clock = Date.parse(afterManual.next_attempt_at);
  t.equal(await dispatcher.runOnce(), true); // the scheduled second attempt fails: the third is 5 min later
  const [afterSecond] = (await h.deliveries()).data;
  t.equal(afterSecond.attempts.length, 3);
  t.equal(Date.parse(afterSecond.next_attempt_at) - clock, 5 * 60_000);
});

t.test('a manual retry of a delivery that had failed for good, failing again, stays failed', async (t) => {
  const h = await setup(t);
  const receiver = await startReceiver(t, [410, 500]);
  await h.createTask(receiver.url);
  await testWorker(t, h).runOnce();
  const dispatcher = h.makeDispatcher();
  await drain(dispatcher);
  const [gone] = (await h.deliveries()).data;
  t.equal(gone.status, 'failed');
  await h.app.inject({ method: 'POST', url: `/api/v1/webhooks/deliveries/${gone.delivery_id}/retry`, headers: h.auth });
  await drain(dispatcher);
  const [after] = (await h.deliveries()).data;
  t.equal(after.attempts.length, 2);
  t.equal(after.status, 'failed');
  t.equal(after.next_attempt_at, null);
});

t.test(
  '100 manual retries 15 ms apart: at most the budget is queued (202), the rest 429 with Retry-After',
  async (t) => {
    const h = await setup(t);
    const receiver = await startReceiver(t, [200]);
    await h.createTask(receiver.url);
    await testWorker(t, h).runOnce();
    const dispatcher = h.makeDispatcher({ now: () => new Date() });
    await drain(dispatcher);
    const [delivery] = (await h.deliveries()).data;
    dispatcher.start();
    t.teardown(() => dispatcher.stop());

    const statuses: Record<number, number> = {};
    const codes = new Set<string>();
    let withoutRetryAfter = 0;
    for (let i = 0; i < 100; i++) {
      const res = await h.app.inject({
        method: 'POST',
        url: `/api/v1/webhooks/deliveries/${delivery.delivery_id}/retry`,
        headers: h.auth,
      });
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      if (res.statusCode === 429) {
        codes.add(res.json().code);
        if (!(Number(res.headers['retry-after']) >= 1)) withoutRetryAfter++;
      }
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    await dispatcher.stop();
    await drain(dispatcher);
    const budget = h.config.WEBHOOK_MANUAL_RETRIES_PER_HOUR;
    t.ok((statuses[202] ?? 0) >= 1 && statuses[202] <= budget, `${statuses[202]} queued, at most ${budget}`);
    t.equal((statuses[202] ?? 0) + (statuses[429] ?? 0), 100, 'every other one refused with 429');
    t.equal(withoutRetryAfter, 0, 'Retry-After on every refusal');
    t.ok(codes.has('retry_budget_exhausted'), 'the budget ran out');
    t.ok(receiver.received.length <= budget + 1, `the receiver got ${receiver.received.length} POSTs`);
    const [after] = (await h.deliveries()).data;
    t.equal(after.attempt_count, receiver.received.length);
    t.ok(after.attempts.length <= 1000);
  },
);
