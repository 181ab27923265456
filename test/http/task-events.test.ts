import t, { type Test } from 'tap';
import { GenerationError } from '../../src/generators/port.js';
import type { ImageGenerator } from '../../src/generators/port.js';
import { HmacMediaUrlSigner } from '../../src/services/media-url-signer.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp, TEST_MEDIA_SIGNING_SECRET, type TestApp, fileTestApp } from '../helpers/app.js';
import { openEventStream, type EventStream } from '../helpers/event-stream.js';
import { listenOnLoopback } from '../helpers/raw-http.js';
import { GatedGenerator, ScriptedGenerator, testWorker } from '../helpers/worker.js';

/**
 * An app on a loopback port (`base`), an in-process worker running `generator` that the test starts
 * and that stops when the test ends, and an account of the test's own.
 */
async function onApp(t: Test, harness: TestApp, events: TaskEvents, base: string, generator?: ImageGenerator) {
  // Started by the test once it holds a stream, so that it sees the task CREATED first.
  const startWorker = () => testWorker(t, harness, { events, generator }).start();
  const account = await harness.newAccount();
  const create = async (auth = account.auth) => {
    const response = await harness.app.inject({
      method: 'POST',
      url: '/api/v1/images/generations',
      headers: auth,
      payload: { model: 'alpha-pro', prompt: 'a lighthouse at dusk' },
    });
    if (response.statusCode !== 202) throw new Error(`create failed: ${response.body}`);
    return response.json().data;
  };
  const get = async (taskId: string) =>
    (await harness.app.inject({ url: `/api/v1/images/generations/${taskId}`, headers: account.auth })).json().data;
  const eventsUrl = (taskId: string) => `${base}/api/v1/images/generations/${taskId}/events`;
  return { ...harness, ...account, base, create, get, eventsUrl, startWorker };
}

/** An app of the test's own on a loopback port. */
async function setup(t: Test, env: Record<string, string> = {}) {
  const events = new TaskEvents();
  const harness = await buildTestApp(t, env, { events });
  const port = await listenOnLoopback(harness.app);
  return onApp(t, harness, events, `http://127.0.0.1:${port}`);
}

/**
 * An app of the file on a loopback port, built and listening before the first test; each test
 * brings an account (and, when it starts one, a worker) of its own.
 */
function fileApp(env: Record<string, string>, now?: () => Date) {
  const events = new TaskEvents();
  const testApp = fileTestApp(env, { events, now });
  let base = '';
  t.before(async () => {
    base = `http://127.0.0.1:${await listenOnLoopback(testApp().app)}`;
  });
  return (t: Test, generator?: ImageGenerator) => onApp(t, testApp(), events, base, generator);
}

/**
 * The app of the tests that run a worker: each leaves its task terminal, so no test's worker finds
 * another's. Its fallback re-read is far beyond any test's patience, so that only the claim's
 * signal can bring a change (what the second test checks); its clock is the real one unless a
 * test stops it for its own duration.
 */
let stoppedAt: Date | undefined;
const workerApp = fileApp({ LONG_POLL_FALLBACK_MS: '120000' }, () => stoppedAt ?? new Date());
/** The app of the tests without a worker: two streams per key at most, and a heartbeat every 100 ms. */
const streamsApp = fileApp({ SSE_MAX_STREAMS_PER_KEY: '2', SSE_HEARTBEAT_MS: '100' });

async function nextEvent(stream: EventStream) {
  const event = await stream.next();
  if (!event) throw new Error('the stream ended');
  return { id: event.id ?? '', event: event.event, data: JSON.parse(event.data) };
}

t.test('a stream sends CREATED, IN_PROGRESS, COMPLETED as GET returns them, then done, and closes', async (t) => {
  const gate = new GatedGenerator();
  // The app presents every body at one instant: a task's signed URLs expire at a whole minute
  // after they are presented, so bodies presented on either side of a minute's turn would differ.
  stoppedAt = new Date();
  t.teardown(() => {
    stoppedAt = undefined;
  });
  const h = await workerApp(t, gate);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  t.equal(stream.status, 200);
  t.match(stream.headers.get('content-type'), /^text\/event-stream/);
  t.match(stream.headers.get('cache-control'), /no-cache/);
  t.equal(stream.headers.get('x-accel-buffering'), 'no');
  t.equal(stream.headers.get('content-encoding'), null, 'never compressed');

  const seen = [await nextEvent(stream)];
  t.equal(stream.retry, 2000, 'a retry hint comes with the first event');
  h.startWorker();
  await gate.started;
  seen.push(await nextEvent(stream));
  gate.open();
  seen.push(await nextEvent(stream));
  t.same(
    seen.map((e) => [e.event, e.data.status]),
    [
      ['task', 'CREATED'],
      ['task', 'IN_PROGRESS'],
      ['task', 'COMPLETED'],
    ],
  );
  const ids = seen.map((e) => Number(e.id));
  t.same(
    [...ids].sort((a, b) => a - b),
    ids,
    'ids order the changes',
  );
  t.equal(new Set(ids).size, 3);
  t.same(seen[2].data, await h.get(task.task_id), 'the task body is what GET returns');
  t.same(seen[0].data, task, 'the first event is the task as created');
  t.same(await nextEvent(stream), { id: '', event: 'done', data: { task_id: task.task_id, status: 'COMPLETED' } });
  t.equal(await stream.next(), null, 'the server closes after done');
});

t.test("a worker's claim reaches the stream at once, not at the fallback re-read", async (t) => {
  const gate = new GatedGenerator();
  // A fallback re-read far beyond the test's patience: only the claim's signal can bring IN_PROGRESS.
  const h = await workerApp(t, gate);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  t.equal((await nextEvent(stream)).data.status, 'CREATED');
  h.startWorker();
  await gate.started;
  const next = await Promise.race([
    nextEvent(stream),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('no IN_PROGRESS event within 10 s of the claim')), 10_000).unref(),
    ),
  ]);
  t.same([next.event, next.data.status], ['task', 'IN_PROGRESS']);
  gate.open();
  t.equal((await nextEvent(stream)).data.status, 'COMPLETED', 'the attempt went on: its own claim did not abort it');
});

t.test('a canceled task ends the stream', async (t) => {
  const h = await streamsApp(t);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  t.equal((await nextEvent(stream)).data.status, 'CREATED');
  await h.app.inject({ method: 'POST', url: `/api/v1/images/generations/${task.task_id}/cancel`, headers: h.auth });
  t.equal((await nextEvent(stream)).data.status, 'CANCELED');
  t.equal((await nextEvent(stream)).event, 'done');
  t.equal(await stream.next(), null);
});

t.test('a failed task ends the stream with its error', async (t) => {
  const failing = new ScriptedGenerator([new GenerationError('content_policy', 'refused by the model', false)]);
  const h = await workerApp(t, failing);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  h.startWorker();
  let event = await nextEvent(stream);
  while (event.event === 'task' && event.data.status !== 'FAILED') event = await nextEvent(stream);
  t.match(event.data, { status: 'FAILED', error: { code: 'content_policy' } });
  t.same(await nextEvent(stream), { id: '', event: 'done', data: { task_id: task.task_id, status: 'FAILED' } });
  t.equal(await stream.next(), null);
});

t.test('Last-Event-ID resumes: only what the client missed is sent', async (t) => {
  const gate = new GatedGenerator();
  const h = await workerApp(t, gate);
  const task = await h.create();
  const first = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  const created = await nextEvent(first);
  first.close();
  h.startWorker();
  await gate.started;

  const resumed = await openEventStream(h.eventsUrl(task.task_id), { ...h.auth, 'last-event-id': created.id });
  const missed = await nextEvent(resumed);
  t.equal(missed.data.status, 'IN_PROGRESS', 'the change made while away, not CREATED again');
  t.ok(Number(missed.id) > Number(created.id));
  resumed.close();

  const upToDate = await openEventStream(h.eventsUrl(task.task_id), { ...h.auth, 'last-event-id': missed.id });
  gate.open();
  const completed = await nextEvent(upToDate);
  t.equal(completed.data.status, 'COMPLETED', 'nothing is repeated; the next change comes');
  t.equal((await nextEvent(upToDate)).event, 'done');

  const afterEnd = await fetch(h.eventsUrl(task.task_id), { headers: { ...h.auth, 'last-event-id': completed.id } });
  t.equal(afterEnd.status, 204, 'nothing left: 204 tells an EventSource to stop reconnecting');

  const foreign = await openEventStream(h.eventsUrl(task.task_id), { ...h.auth, 'last-event-id': 'not-ours' });
  t.equal((await nextEvent(foreign)).data.status, 'COMPLETED', 'an id that is not ours sends the task as it is');
});

t.test('the stream_url works without the key', async (t) => {
  const h = await streamsApp(t);
  const task = await h.create();
  const url = new URL(task.stream_url);
  t.equal(url.pathname, `/api/v1/images/generations/${task.task_id}/events`);
  t.ok(Date.parse(task.stream_url_expires_at) > Date.now());
  const stream = await openEventStream(`${h.base}${url.pathname}${url.search}`);
  t.equal(stream.status, 200);
  t.equal((await nextEvent(stream)).data.status, 'CREATED');
  stream.close();
});

t.test('a tampered, expired, other-task or media signature is 401 problem+json; an unknown task 404', async (t) => {
  const h = await streamsApp(t);
  const task = await h.create();
  const other = await h.create();
  const { pathname, searchParams } = new URL(task.stream_url);
  const signature = searchParams.get('signature')!;
  const expires = searchParams.get('expires')!;
  const tampered = `${signature.slice(0, -1)}${signature.endsWith('A') ? 'B' : 'A'}`;
  const past = new HmacMediaUrlSigner(TEST_MEDIA_SIGNING_SECRET, h.base, 60).streamUrl(
    task.task_id,
    new Date(Date.now() - 3_600_000),
  );
  const mediaSigned = new HmacMediaUrlSigner(TEST_MEDIA_SIGNING_SECRET, h.base, 60).signedUrl(task.task_id, new Date());
  const otherTaskPath = `/api/v1/images/generations/${other.task_id}/events`;
  for (const [label, url] of [
    ['tampered', `${pathname}?expires=${expires}&signature=${tampered}`],
    ['expiry moved', `${pathname}?expires=${Number(expires) + 60}&signature=${signature}`],
    ['expired', `${pathname}${new URL(past.url).search}`],
    ["another task's", `${otherTaskPath}?expires=${expires}&signature=${signature}`],
    ['a media URL signature', `${pathname}${new URL(mediaSigned.url).search}`],
    ['half a signature', `${pathname}?expires=${expires}`],
    ['no key and no signature', pathname],
  ]) {
    const response = await h.app.inject({ url });
    t.equal(response.statusCode, 401, label);
    t.match(response.headers['content-type'], /^application\/problem\+json/, label);
    t.equal(response.json().code, 'unauthorized', label);
  }
  const unknownId = '01900000-0000-7000-8000-000000000000';
  const signedUnknown = new HmacMediaUrlSigner(TEST_MEDIA_SIGNING_SECRET, h.base, 60).streamUrl(unknownId, new Date());
  const response = await h.app.inject({ url: new URL(signedUnknown.url).pathname + new URL(signedUnknown.url).search });
  t.equal(response.statusCode, 404);
  t.equal(response.json().code, 'not_found');
});

t.test("another account's task is 404 with its key", async (t) => {
  const h = await streamsApp(t);
  const task = await h.create();
  const stranger = await h.newAccount();
  const response = await h.app.inject({
    url: `/api/v1/images/generations/${task.task_id}/events`,
    headers: stranger.auth,
  });
  t.equal(response.statusCode, 404);
  t.equal(response.json().code, 'not_found');
});

t.test(
  'SSE_MAX_STREAMS_PER_KEY caps open streams per key: beyond, 429 too_many_streams before any event',
  async (t) => {
    const h = await streamsApp(t);
    const task = await h.create();
    const open = [await openEventStream(h.eventsUrl(task.task_id), h.auth)];
    open.push(await openEventStream(h.eventsUrl(task.task_id), h.auth));
    for (const stream of open) await nextEvent(stream);
    const refused = await fetch(h.eventsUrl(task.task_id), { headers: h.auth });
    t.equal(refused.status, 429);
    t.match(refused.headers.get('content-type'), /^application\/problem\+json/);
    t.equal((await refused.json()).code, 'too_many_streams');

    const otherKey = await h.newAccount();
    const otherTask = await h.create(otherKey.auth);
    const elsewhere = await openEventStream(h.eventsUrl(otherTask.task_id), otherKey.auth);
    t.equal(elsewhere.status, 200, "another key's streams are counted apart");
    elsewhere.close();

    open.pop()!.close();
    let again = await fetch(h.eventsUrl(task.task_id), { headers: h.auth });
    // The server frees the slot when it sees the close, a moment after the client made it.
    for (let tries = 0; again.status === 429 && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      again = await fetch(h.eventsUrl(task.task_id), { headers: h.auth });
    }
    t.equal(again.status, 200, 'a closed stream gives its slot back');
    await again.body?.cancel();
    open[0].close();
  },
);

t.test('a comment heartbeat keeps an idle stream open', async (t) => {
  const h = await streamsApp(t);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  await nextEvent(stream);
  while (stream.comments.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(stream.comments[0].trim(), 'heartbeat');
  stream.close();
});

t.test('shutting down ends every stream with a reconnect event', async (t) => {
  // An app of its own: the test shuts it down.
  const h = await setup(t);
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  await nextEvent(stream);
  const closing = h.app.close();
  t.same(await nextEvent(stream), { id: '', event: 'reconnect', data: { reason: 'shutdown' } });
  t.equal(await stream.next(), null);
  await closing;
});

t.test('a stream ends at the task deadline with a reconnect event', async (t) => {
  // An app of its own: a deadline of a second would end the other tests' streams.
  const h = await setup(t, { TASK_DEADLINE_MS: '1000' });
  const task = await h.create();
  const stream = await openEventStream(h.eventsUrl(task.task_id), h.auth);
  await nextEvent(stream);
  t.same(await nextEvent(stream), { id: '', event: 'reconnect', data: { reason: 'deadline' } });
  t.equal(await stream.next(), null);
});
