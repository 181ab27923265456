import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import {
  admitTasks,
  assertReferencesUsable,
  finishEffects,
  refundOf,
  usableAsReference,
  type AdmissionFacts,
} from '../../src/core/task-admission.js';
import { taskFinish } from '../../src/core/task-execution.js';
import { createTask, type TaskRecord } from '../../src/core/task.js';
import { budgetPeriodStart, UNSCOPED, type KeyScope } from '../../src/core/key-scope.js';
import { csvCell, usageCsv } from '../../src/core/admin.js';

const AT = new Date('2026-03-01T12:00:00Z');
const LATER = new Date(AT.getTime() + 60_000);
let sequence = 0;

/** alpha-pro at 1K: 25 tokens. */
function task(over: Partial<TaskRecord> = {}, references?: string[]): TaskRecord {
  sequence += 1;
  const created = createTask(
    {
      model: 'alpha-pro',
      prompt: 'a lighthouse',
      ...(references ? { image_reference: references } : {}),
    } as never,
    { accountId: 'acc', now: AT, newId: () => `task-${sequence}` },
  );
  return { ...created, ...over };
}

const facts = (over: Partial<AdmissionFacts> = {}): AdmissionFacts => ({
  tasks: [task()],
  account: { balance: 100, activeTasks: 0, status: 'active' },
  referencedMedia: [],
  limits: { maxActiveTasks: 3 },
  ...over,
});

const refusalOf = (run: () => unknown): string | undefined => {
  try {
    run();
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return undefined;
};

t.test('a task that fits is admitted: its debit, one more active task, it joins the queue', async (t) => {
  const one = task();
  const admission = admitTasks(facts({ tasks: [one] }));
  t.same(admission, {
    debits: [{ taskId: one.id, amount: 25, balanceAfter: 75, at: AT }],
    balanceAfter: 75,
    activeTasksDelta: 1,
    joinsQueue: true,
    completesKey: false,
  });
});

t.test('the cap refuses the task that would pass it, and only that one', async (t) => {
  t.equal(
    refusalOf(() => admitTasks(facts({ account: { balance: 100, activeTasks: 2, status: 'active' } }))),
    undefined,
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ account: { balance: 100, activeTasks: 3, status: 'active' } }))),
    'too_many_active_tasks',
  );
});

t.test('a task that does not count as active is never refused by the cap, and takes no room', async (t) => {
  const finished = task({ status: 'COMPLETED', completedAt: AT });
  const admission = admitTasks(
    facts({ tasks: [finished], account: { balance: 100, activeTasks: 9, status: 'active' } }),
  );
  t.equal(admission.activeTasksDelta, 0);
  t.equal(admission.joinsQueue, false, 'a finished task wakes no worker');
  t.equal(admission.balanceAfter, 75, 'it is charged all the same');
});

t.test('a task the balance cannot pay for is refused; a missing account is refused alike', async (t) => {
  t.equal(
    refusalOf(() => admitTasks(facts({ account: { balance: 24, activeTasks: 0, status: 'active' } }))),
    'insufficient_tokens',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ account: { balance: 25, activeTasks: 0, status: 'active' } }))),
    undefined,
    'to the last token',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ account: null }))),
    'insufficient_tokens',
  );
});

t.test('the refusals come in order: references, cap, balance, key', async (t) => {
  const everythingWrong = facts({
    tasks: [task({}, ['gone'])],
    account: { balance: 0, activeTasks: 3, status: 'active' },
    keyStillHeld: false,
  });
  t.equal(
    refusalOf(() => admitTasks(everythingWrong)),
    'invalid_media_reference',
  );
  t.equal(
    refusalOf(() => admitTasks({ ...everythingWrong, tasks: [task()] })),
    'too_many_active_tasks',
  );
  t.equal(
    refusalOf(() => admitTasks({ ...everythingWrong, tasks: [task()], limits: { maxActiveTasks: 10 } })),
    'insufficient_tokens',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ keyStillHeld: false }))),
    'idempotency_in_progress',
  );
});

t.test('a held key is completed with the admission; without a key there is nothing to complete', async (t) => {
  t.equal(admitTasks(facts({ keyStillHeld: true })).completesKey, true);
  t.equal(admitTasks(facts()).completesKey, false);
});

t.test('several tasks are admitted against one read of the account, all or none', async (t) => {
  const [a, b, c] = [task(), task(), task()];
  const admission = admitTasks(facts({ tasks: [a, b, c] }));
  t.same(
    admission.debits.map((d) => [d.taskId, d.balanceAfter]),
    [
      [a.id, 75],
      [b.id, 50],
      [c.id, 25],
    ],
    'each debit with the balance after it, in order',
  );
  t.equal(admission.activeTasksDelta, 3);
  t.equal(
    refusalOf(() =>
      admitTasks(facts({ tasks: [a, b, c], account: { balance: 74, activeTasks: 0, status: 'active' } })),
    ),
    'insufficient_tokens',
    'two would fit, the third not: none is admitted',
  );
  t.equal(
    refusalOf(() =>
      admitTasks(facts({ tasks: [a, b, c], account: { balance: 100, activeTasks: 1, status: 'active' } })),
    ),
    'too_many_active_tasks',
  );
  t.match(
    (() => {
      try {
        admitTasks(facts({ tasks: [a, b], account: { balance: 10, activeTasks: 0, status: 'active' } }));
      } catch (error) {
        return (error as Error).message;
      }
    })(),
    /These 2 tasks cost 50 tokens/,
  );
});

t.test('a reference must be an upload of the account, unexpired when the task is created', async (t) => {
  const upload = { id: 'up', source: 'upload' as const, expiresAt: LATER };
  t.ok(usableAsReference(upload, AT));
  t.notOk(usableAsReference({ ...upload, expiresAt: AT }, AT), 'expiring at that instant');
  t.notOk(usableAsReference({ ...upload, source: 'generated' }, AT), 'a generated image');
  t.doesNotThrow(() => assertReferencesUsable(['up'], [upload], AT));
  t.throws(() => assertReferencesUsable(['up', 'missing'], [upload], AT), {
    code: 'invalid_media_reference',
    fieldErrors: [{ pointer: '/image_reference/1' }],
  });
  t.equal(
    refusalOf(() =>
      admitTasks(
        facts({
          tasks: [task({}, ['up', 'gen'])],
          referencedMedia: [upload, { ...upload, id: 'gen', source: 'generated' }],
        }),
      ),
    ),
    'invalid_media_reference',
  );
});

t.test('finishing: the outbox row only for a task with a webhook URL and a move that emits one', async (t) => {
  const fail = taskFinish('fail', 'attempt');
  t.same(finishEffects(fail, { webhookUrl: 'https://hooks.example/x' }), {
    activeTasksDelta: -1,
    refund: true,
    webhook: { type: 'image.generation.failed', url: 'https://hooks.example/x' },
  });
  t.same(finishEffects(fail, { webhookUrl: null }).webhook, null);
  t.same(finishEffects(taskFinish('complete', 'attempt'), { webhookUrl: null }), {
    activeTasksDelta: -1,
    refund: false,
    webhook: null,
  });
});

t.test('a refund is made once, and only for a task that exists', async (t) => {
  t.same(refundOf({ accountId: 'acc', cost: 25 }, false), { accountId: 'acc', amount: 25 });
  t.equal(refundOf({ accountId: 'acc', cost: 25 }, true), null);
  t.equal(refundOf(null, false), null);
});

/** A key with a scope (docs/design.md §3.11) and what it spent in its period. */
const scoped = (scope: Partial<KeyScope>, spentInPeriod = 0): AdmissionFacts['key'] => ({
  scope: { ...UNSCOPED, ...scope },
  spentInPeriod,
});

t.test("a key's scope: refusals in order, the budget counting every task of the request", async (t) => {
  const suspended = { balance: 100, activeTasks: 0, status: 'suspended' as const };
  t.equal(
    refusalOf(() => admitTasks(facts({ account: suspended }))),
    'account_suspended',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ key: scoped({ expiresAt: AT }) }))),
    'unauthorized',
    'expired at AT',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ key: scoped({ expiresAt: LATER }) }))),
    undefined,
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ key: scoped({ models: ['beta-v5-pro'] }) }))),
    'model_not_allowed',
  );
  const budget = { tokens: 50, period: 'day' as const };
  t.equal(
    refusalOf(() => admitTasks(facts({ key: scoped({ tokenBudget: budget }, 25) }))),
    undefined,
    'to the token',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ key: scoped({ tokenBudget: budget }, 26) }))),
    'key_budget_exhausted',
  );
  t.equal(
    refusalOf(() => admitTasks(facts({ tasks: [task(), task()], key: scoped({ tokenBudget: budget }, 1) }))),
    'key_budget_exhausted',
    'two tasks of one request against one budget',
  );
  t.equal(
    refusalOf(() =>
      admitTasks(
        facts({ account: { balance: 10, activeTasks: 0, status: 'active' }, key: scoped({ tokenBudget: budget }, 40) }),
      ),
    ),
    'key_budget_exhausted',
    'the budget before the balance',
  );
});

t.test('budget periods are UTC calendar days and months', async (t) => {
  const at = new Date('2026-03-31T23:30:00-02:00');
  t.equal(budgetPeriodStart('day', at).toISOString(), '2026-04-01T00:00:00.000Z');
  t.equal(budgetPeriodStart('month', at).toISOString(), '2026-04-01T00:00:00.000Z');
  t.equal(budgetPeriodStart('month', new Date('2026-03-31T23:59:59Z')).toISOString(), '2026-03-01T00:00:00.000Z');
  t.equal(budgetPeriodStart(null, at).getTime(), 0);
});

t.test('CSV cells never start a formula, and are quoted as RFC 4180 says', async (t) => {
  for (const cell of ['=1+1', '+1', '-1', '@SUM(A1)', '\tx']) t.equal(csvCell(cell)[0], "'", JSON.stringify(cell));
  t.equal(csvCell('a,"b"'), '"a,""b"""');
  t.equal(csvCell(-5), '-5', 'numbers are numbers');
  t.equal(csvCell(null), '');
  t.equal(
    usageCsv(
      [{ model: '=cmd', tasks: 1, images: 1, tokens_charged: 25, tokens_refunded: 0, failed: 0, canceled: 0 }],
      ['model'],
    ),
    "model,tasks,images,tokens_charged,tokens_refunded,failed,canceled\r\n'=cmd,1,1,25,0,0,0\r\n",
  );
});
