import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import {
  createTask,
  isTerminal,
  nextStatus,
  refundsOnEntry,
  statusesAllowing,
  withoutGeneratedMedia,
  type TaskEvent,
  type TaskStatus,
} from '../../src/core/task.js';

const NOW = new Date('2030-01-02T03:04:05.678Z');
const TASK_ID = '01890a5d-ac96-774b-bcce-b302099a8057';
const MEDIA_ID = '01890a5d-ac96-774b-bcce-b302099a8058';
const context = { accountId: 'acct-1', now: NOW, newId: () => TASK_ID };

const STATUSES: TaskStatus[] = ['CREATED', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELED'];
const EVENTS: TaskEvent[] = ['claim', 'complete', 'fail', 'cancel', 'release'];

/** docs/design.md §3.5, every allowed move written out; everything not listed must be refused. */
const ALLOWED: [TaskStatus, TaskEvent, TaskStatus][] = [
  ['CREATED', 'claim', 'IN_PROGRESS'],
  ['CREATED', 'cancel', 'CANCELED'],
  // Retries or deadline exhausted while the task waits (e.g. after a lost lease) end it as FAILED.
  ['CREATED', 'fail', 'FAILED'],
  ['IN_PROGRESS', 'complete', 'COMPLETED'],
  ['IN_PROGRESS', 'fail', 'FAILED'],
  ['IN_PROGRESS', 'cancel', 'CANCELED'],
  ['IN_PROGRESS', 'release', 'CREATED'],
];

t.test('createTask builds the exact record from a text-to-image request', async (t) => {
  const task = createTask(
    { model: 'alpha-pro', prompt: 'a red fox', parameters: { aspect_ratio: '16:9', resolution: '4K' } },
    context,
  );
  t.strictSame(task, {
    id: TASK_ID,
    accountId: 'acct-1',
    status: 'CREATED',
    model: 'alpha-pro',
    prompt: 'a red fox',
    imageReference: [],
    parameters: { aspect_ratio: '16:9', resolution: '4K', output_format: 'png', output_compression: null, seed: null },
    width: 5504,
    height: 3072,
    cost: 50,
    webhookUrl: null,
    endUserId: null,
    keyId: null,
    generated: [],
    error: null,
    attempt: 0,
    deferredAttempts: 0,
    createdAt: NOW,
    startedAt: null,
    completedAt: null,
  });
});

t.test('createTask applies defaults and keeps references and webhook', async (t) => {
  const task = createTask(
    {
      model: 'beta-v5-pro',
      prompt: 'same cat, at night',
      image_reference: [MEDIA_ID],
      webhook_url: 'https://example.com/hook',
    },
    context,
  );
  t.strictSame(task, {
    id: TASK_ID,
    accountId: 'acct-1',
    status: 'CREATED',
    model: 'beta-v5-pro',
    prompt: 'same cat, at night',
    imageReference: [MEDIA_ID],
    parameters: { aspect_ratio: '1:1', resolution: '1K', output_format: 'png', output_compression: null, seed: null },
    width: 1024,
    height: 1024,
    cost: 25,
    webhookUrl: 'https://example.com/hook',
    endUserId: null,
    keyId: null,
    generated: [],
    error: null,
    attempt: 0,
    deferredAttempts: 0,
    createdAt: NOW,
    startedAt: null,
    completedAt: null,
  });
});

t.test('createTask takes its id from the injected source, once', async (t) => {
  let calls = 0;
  const task = createTask(
    { model: 'beta-v5-pro', prompt: 'abc', parameters: { resolution: '2K' } },
    {
      ...context,
      newId: () => `id-${++calls}`,
    },
  );
  t.equal(task.id, 'id-1');
  t.equal(calls, 1);
  t.equal(task.cost, 50);
});

for (const [from, event, to] of ALLOWED) {
  t.test(`${from} --${event}--> ${to}`, async (t) => {
    t.equal(nextStatus(from, event), to);
  });
}

t.test('every move not in the table is refused with invalid_state', async (t) => {
  for (const from of STATUSES) {
    for (const event of EVENTS) {
      if (ALLOWED.some(([f, e]) => f === from && e === event)) continue;
      t.throws(() => nextStatus(from, event), { name: 'DomainError', code: 'invalid_state' }, `${from} --${event}-->`);
    }
  }
});

t.test('canceling a COMPLETED task throws DomainError invalid_state', async (t) => {
  try {
    nextStatus('COMPLETED', 'cancel');
    t.fail('expected a DomainError');
  } catch (error) {
    t.ok(error instanceof DomainError);
    t.equal((error as DomainError).code, 'invalid_state');
  }
});

t.test('forbidden moves out of the terminal and waiting states', async (t) => {
  t.throws(() => nextStatus('FAILED', 'cancel'), { code: 'invalid_state' });
  t.throws(() => nextStatus('CANCELED', 'cancel'), { code: 'invalid_state' });
  t.throws(() => nextStatus('COMPLETED', 'fail'), { code: 'invalid_state' });
  t.throws(() => nextStatus('CREATED', 'complete'), { code: 'invalid_state' });
  t.throws(() => nextStatus('CREATED', 'release'), { code: 'invalid_state' });
  t.throws(() => nextStatus('IN_PROGRESS', 'claim'), { code: 'invalid_state' });
});

t.test('statusesAllowing lists the guard statuses of each event', async (t) => {
  t.same(statusesAllowing('claim').sort(), ['CREATED']);
  t.same(statusesAllowing('complete').sort(), ['IN_PROGRESS']);
  t.same(statusesAllowing('fail').sort(), ['CREATED', 'IN_PROGRESS']);
  t.same(statusesAllowing('cancel').sort(), ['CREATED', 'IN_PROGRESS']);
  t.same(statusesAllowing('release').sort(), ['IN_PROGRESS']);
});

t.test('COMPLETED, FAILED and CANCELED are terminal', async (t) => {
  t.strictSame(
    STATUSES.filter((s) => isTerminal(s)),
    ['COMPLETED', 'FAILED', 'CANCELED'],
  );
});

t.test('entering FAILED or CANCELED refunds; nothing else does', async (t) => {
  t.strictSame(
    STATUSES.filter((s) => refundsOnEntry(s)),
    ['FAILED', 'CANCELED'],
  );
});

t.test("a generated image that is gone leaves the task's list; the others keep their order", async (t) => {
  const ref = (id: string) => ({ media_id: id, content_type: 'image/png', width: 1, height: 1, size_bytes: 1 });
  const generated = [ref('a'), ref('b'), ref('c')];
  t.strictSame(withoutGeneratedMedia(generated, 'b'), [ref('a'), ref('c')]);
  t.equal(withoutGeneratedMedia(generated, 'z'), null, 'unchanged: nothing to write');
  t.equal(generated.length, 3, 'the input is not changed');
});
