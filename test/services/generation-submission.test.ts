// Not in the PostgreSQL pass: the create use case over a fake store.
import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { GenerationSubmission, type GenerationOrder } from '../../src/services/generation-submission.js';
import { IdempotencyService } from '../../src/services/idempotency.js';
import { TaskEvents } from '../../src/services/task-events.js';
import type { IdempotencyStore, Store, StoredResponse } from '../../src/store/port.js';

/**
 * The one create's order of steps around the store, with the store's key and task writes
 * written down: what an edit's slow uploads, a refusal and a replay do to the Idempotency-Key and
 * to the images. Through HTTP and the SDKs: test/http/one-create.test.ts.
 */
const STORED: StoredResponse = { statusCode: 200, headers: {}, body: Buffer.from('{"task_ids":["t1"]}') };

function recording(options: { claim?: 'acquired' | 'replay'; insert?: () => Promise<void> } = {}) {
  const calls: string[] = [];
  let renewed = () => {};
  const firstRenewal = new Promise<void>((resolve) => {
    renewed = resolve;
  });
  const keys = {
    claimIdempotencyKey: async () => {
      calls.push('claim');
      return options.claim === 'replay' ? { outcome: 'replay', response: STORED } : { outcome: 'acquired' };
    },
    renewIdempotencyKey: async () => {
      calls.push('renew');
      renewed();
      return true;
    },
    releaseIdempotencyKey: async () => {
      calls.push('release');
    },
  } as unknown as IdempotencyStore;
  const tasks = {
    insertTaskWithDebit: async (_task: unknown, _limits: unknown, completesKey: unknown) => {
      calls.push(completesKey ? 'insert and complete the key' : 'insert');
      await (options.insert?.() ?? Promise.resolve());
    },
  };
  const submission = new GenerationSubmission({
    store: { tasks, media: {} } as unknown as Pick<Store, 'tasks' | 'media'>,
    idempotency: new IdempotencyService({ store: keys, now: () => new Date() }),
    deleteUpload: async (_accountId, mediaId) => {
      calls.push(`delete ${mediaId}`);
    },
    events: new TaskEvents(),
    now: () => new Date(),
    maxActiveTasks: 10,
    webhookPolicy: { allowPrivate: true },
    log: { warn() {} },
  });
  return { calls, submission, firstRenewal };
}

const order = (uploads: GenerationOrder['referenceUploads']): GenerationOrder => ({
  accountId: 'account',
  request: { model: 'alpha-pro', prompt: 'the same lighthouse, at night' } as GenerationOrder['request'],
  idempotency: { key: 'k', fingerprint: 'f' },
  referenceUploads: uploads,
  answerOf: () => STORED,
});

t.test("the key's lease is renewed while an edit's images are stored, before the charge", async (t) => {
  const { calls, submission, firstRenewal } = recording();
  // The renewal timer is unref'd (it must not keep a process alive); this keeps the test's alive meanwhile.
  const keepAlive = setTimeout(() => {}, 60_000);
  const submitted = await submission.submit(
    order([
      async () => {
        calls.push('store m1');
        // Slower than a renewal period: an upload of many megabytes.
        await firstRenewal;
        return 'm1';
      },
      async () => {
        calls.push('store m2');
        return 'm2';
      },
    ]),
  );
  clearTimeout(keepAlive);
  t.same(calls, ['claim', 'store m1', 'renew', 'store m2', 'insert and complete the key']);
  t.match(submitted, { replayed: false, response: STORED });
  if (!submitted.replayed) t.same(submitted.tasks[0].imageReference, ['m1', 'm2'], 'the images are the references');
});

t.test('a refused create deletes the images it stored and releases its key', async (t) => {
  const { calls, submission } = recording({
    insert: async () => {
      throw new DomainError('insufficient_tokens', 'The balance is 0 tokens; this costs 25.');
    },
  });
  const uploads = ['m1', 'm2'].map((id) => async () => {
    calls.push(`store ${id}`);
    return id;
  });
  await t.rejects(submission.submit(order(uploads)), { code: 'insufficient_tokens' });
  t.same(calls, ['claim', 'store m1', 'store m2', 'insert and complete the key', 'delete m1', 'delete m2', 'release']);
});

t.test('an image that cannot be stored ends the create: the ones stored before it are deleted', async (t) => {
  const { calls, submission } = recording();
  const uploads = [
    async () => {
      calls.push('store m1');
      return 'm1';
    },
    async () => {
      calls.push('store m2');
      throw new DomainError('invalid_image', 'The file does not decode as an image.');
    },
  ];
  await t.rejects(submission.submit(order(uploads)), { code: 'invalid_image' });
  t.same(calls, ['claim', 'store m1', 'store m2', 'delete m1', 'release']);
});

t.test('a replay stores no image and charges nothing', async (t) => {
  const { calls, submission } = recording({ claim: 'replay' });
  const submitted = await submission.submit(
    order([
      async () => {
        calls.push('store m1');
        return 'm1';
      },
    ]),
  );
  t.same(submitted, { replayed: true, response: STORED });
  t.same(calls, ['claim']);
});
