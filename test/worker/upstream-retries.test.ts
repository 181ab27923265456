import t from 'tap';
import { GeminiGenerator } from '../../src/generators/gemini-generator.js';
import { OpenAiImagesGenerator } from '../../src/generators/openai-generator.js';
import { FakeUpstream, pngBase64 } from '../helpers/fake-upstream.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { GEMINI_FAILURES } from '../helpers/provider-failures.js';
import { geminiReply, openAiReply } from '../helpers/provider-replies.js';
import { oneQueuedTask, testWorker } from '../helpers/worker.js';

t.test('a Gemini 429 requeues the task no earlier than its Retry-After, then it completes', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(
    geminiReply.error(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted.', { 'retry-after': '120' }),
    geminiReply.image(await pngBase64(1024, 1024)),
  );
  const generator = new GeminiGenerator({
    apiKey: 'k',
    baseUrl: upstream.url,
    model: 'gemini-3-pro-image-preview',
    maxConcurrency: 1,
  });
  let clock = Date.now();
  // A backoff of about 1 ms of its own: only Retry-After can hold the task back.
  const worker = testWorker(t, deps, { generator, retryBaseMs: 1, now: () => new Date(clock) });

  await worker.runOnce();
  t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'CREATED', 'back in the queue');
  clock += 119_000;
  t.equal(await worker.runOnce(), false, 'not runnable before Retry-After is over');
  clock += 2_000;
  t.equal(await worker.runOnce(), true);
  const done = await deps.store.tasks.getTaskById(task.id);
  t.equal(done?.status, 'COMPLETED');
  t.equal(done?.attempt, 2);
  t.equal(upstream.requests.length, 2);
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 0);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('an OpenAI 500 then success completes on the second attempt without a refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(
    openAiReply.error(500, { message: 'The server had an error.', type: 'server_error', code: null }),
    openAiReply.image(await pngBase64(1024, 1024)),
  );
  const generator = new OpenAiImagesGenerator({
    apiKey: 'k',
    baseUrl: `${upstream.url}/v1`,
    model: 'gpt-image-2',
    maxConcurrency: 1,
  });
  let clock = Date.now();
  const worker = testWorker(t, deps, { generator, retryBaseMs: 1_000, now: () => new Date(clock) });

  await worker.runOnce();
  clock += 2_000;
  await worker.runOnce();
  const done = await deps.store.tasks.getTaskById(task.id);
  t.equal(done?.status, 'COMPLETED');
  t.equal(done?.attempt, 2);
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 0);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('transient upstream failures past the attempt limit fail with the stable code and one refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(geminiReply.error(500, 'INTERNAL', 'An internal error has occurred, overloaded shard 7.'));
  const generator = new GeminiGenerator({
    apiKey: 'k',
    baseUrl: upstream.url,
    model: 'gemini-3-pro-image-preview',
    maxConcurrency: 1,
  });
  let clock = Date.now();
  const worker = testWorker(t, deps, { generator, maxAttempts: 2, retryBaseMs: 1_000, now: () => new Date(clock) });

  await worker.runOnce();
  clock += 2_000;
  await worker.runOnce();
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'upstream_unavailable');
  t.equal(failed?.attempt, 2);
  t.notMatch(failed?.error?.message, /overloaded/, "our message, not the provider's");
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test(
  'the worker log names the upstream status and reason, never the key, the prompt or the provider text',
  async (t) => {
    const { deps, task } = await oneQueuedTask(t);
    const upstream = await FakeUpstream.start(t);
    upstream.replyWith(
      geminiReply.error(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded for project 123456.', { 'retry-after': '1' }),
      geminiReply.promptBlocked('SAFETY'),
    );
    const key = 'AIza-secret-key-never-in-logs';
    const generator = new GeminiGenerator({
      apiKey: key,
      baseUrl: upstream.url,
      model: 'gemini-3-pro-image-preview',
      maxConcurrency: 1,
    });
    const lines: string[] = [];
    const record = (obj: object, msg: string) =>
      void lines.push(
        JSON.stringify({ ...obj, msg }, (_k, v: unknown) =>
          v instanceof Error ? { message: v.message, stack: v.stack } : v,
        ),
      );
    let clock = Date.now();
    const worker = testWorker(t, deps, {
      generator,
      retryBaseMs: 1,
      now: () => new Date(clock),
      log: { info: record, warn: record, error: record },
    });

    await worker.runOnce();
    clock += 2_000;
    await worker.runOnce();
    t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'FAILED');
    const log = lines.join('\n');
    t.match(log, /"status":429/);
    t.match(log, /RESOURCE_EXHAUSTED/);
    t.match(log, /prompt blocked: SAFETY/);
    t.notMatch(log, new RegExp(key));
    t.notMatch(log, new RegExp(task.prompt));
    t.notMatch(log, /project 123456/);
  },
);

function geminiGenerator(url: string) {
  return new GeminiGenerator({ apiKey: 'k', baseUrl: url, model: 'gemini-3-pro-image-preview', maxConcurrency: 1 });
}

t.test('NO_IMAGE then an image: the second attempt completes, without a refund', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  const noImage = GEMINI_FAILURES.find((row) => row.name === 'finishReason NO_IMAGE')!;
  upstream.replyWith(noImage.reply, geminiReply.image(await pngBase64(1024, 1024)));
  let clock = Date.now();
  const worker = testWorker(t, deps, {
    generator: geminiGenerator(upstream.url),
    retryBaseMs: 1_000,
    now: () => new Date(clock),
  });

  await worker.runOnce();
  clock += 2_000;
  await worker.runOnce();
  const done = await deps.store.tasks.getTaskById(task.id);
  t.equal(done?.status, 'COMPLETED');
  t.equal(upstream.requests.length, 2);
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 0);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('a reply without an image is tried once more, not up to TASK_MAX_ATTEMPTS', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(GEMINI_FAILURES.find((row) => row.name === 'finishReason OTHER')!.reply);
  let clock = Date.now();
  const worker = testWorker(t, deps, {
    generator: geminiGenerator(upstream.url),
    maxAttempts: 5,
    retryBaseMs: 1_000,
    now: () => new Date(clock),
  });

  for (let run = 0; run < 4; run++) {
    await worker.runOnce();
    clock += 60_000;
  }
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'upstream_no_image');
  t.equal(upstream.requests.length, 2, 'two calls, not five');
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

for (const row of [
  'a per-day quota: 429 with a QuotaFailure naming a PerDay quota',
  'an invalid or expired key: 400 INVALID_ARGUMENT, ErrorInfo API_KEY_INVALID',
]) {
  t.test(`${row}: failed at once, one call, refunded`, async (t) => {
    const { deps, accountId, task } = await oneQueuedTask(t);
    const upstream = await FakeUpstream.start(t);
    const failure = GEMINI_FAILURES.find((r) => r.name === row)!;
    upstream.replyWith(failure.reply);
    const worker = testWorker(t, deps, { generator: geminiGenerator(upstream.url), retryBaseMs: 1 });

    await worker.runOnce();
    const failed = await deps.store.tasks.getTaskById(task.id);
    t.equal(failed?.status, 'FAILED');
    t.equal(failed?.error?.code, failure.expect.code);
    t.equal(upstream.requests.length, 1);
    t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 25);
    await assertLedgerInvariant(t, deps.store, accountId);
  });
}

t.test('a Retry-After past the task deadline fails the task at once instead of deferring it', async (t) => {
  const { deps, accountId, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  // A per-minute quota by its QuotaFailure, but the provider asks for an hour: the deadline is 10 minutes.
  upstream.replyWith(
    geminiReply.error(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted.', undefined, [
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '3600s' },
    ]),
  );
  const worker = testWorker(t, deps, { generator: geminiGenerator(upstream.url), retryBaseMs: 1, deadlineMs: 600_000 });

  await worker.runOnce();
  const failed = await deps.store.tasks.getTaskById(task.id);
  t.equal(failed?.status, 'FAILED');
  t.equal(failed?.error?.code, 'deadline_exceeded', 'what its deadline would have made of it, an hour early');
  t.equal(upstream.requests.length, 1);
  t.equal((await deps.store.accounts.ledgerTotals(accountId)).refund, 25);
  await assertLedgerInvariant(t, deps.store, accountId);
});

t.test('the safety identifier is a stable keyed hash of the account, not its id', async (t) => {
  const { safetyIdentifier } = await import('../../src/worker/task-worker.js');
  const id = safetyIdentifier('key-1', 'acct_123');
  t.equal(id, safetyIdentifier('key-1', 'acct_123'), 'stable');
  t.not(id, safetyIdentifier('key-2', 'acct_123'), 'keyed');
  t.not(id, safetyIdentifier('key-1', 'acct_124'));
  t.notMatch(id, /acct_123/);
  t.match(id, /^[0-9a-f]{32}$/);
});

t.test('tokens the provider reports are counted per backend and catalog model', async (t) => {
  const { Registry } = await import('prom-client');
  const { PrometheusWorkerMetrics } = await import('../../src/services/capacity-metrics.js');
  const { deps, task } = await oneQueuedTask(t);
  const upstream = await FakeUpstream.start(t);
  upstream.replyWith(geminiReply.image(await pngBase64(1024, 1024)));
  const registry = new Registry();
  const worker = testWorker(t, deps, {
    generator: geminiGenerator(upstream.url),
    metrics: new PrometheusWorkerMetrics(registry, ['gemini']),
  });
  await worker.runOnce();
  t.equal((await deps.store.tasks.getTaskById(task.id))?.status, 'COMPLETED');
  const text = await registry.metrics();
  t.match(
    text,
    new RegExp(`imagegen_upstream_tokens_total\\{backend="gemini",model="${task.model}",direction="input"\\} 12`),
  );
  t.match(
    text,
    new RegExp(`imagegen_upstream_tokens_total\\{backend="gemini",model="${task.model}",direction="output"\\} 1120`),
  );
});
