import t from 'tap';
import { nextStreamEvent, parseLastEventId, taskStepOf } from '../../src/core/task-stream.js';
import { createTask, type TaskRecord, type TaskStatus } from '../../src/core/task.js';

const base = createTask(
  { model: 'alpha-pro', prompt: 'steps' },
  { accountId: 'a', now: new Date(0), newId: () => '01900000-0000-7000-8000-000000000001' },
);
const at = (status: TaskStatus, attempt: number): TaskRecord => ({ ...base, status, attempt });

t.test('every change of status a task can make raises its step', async (t) => {
  const lifecycles: [TaskStatus, number][][] = [
    [
      ['CREATED', 0],
      ['IN_PROGRESS', 1],
      ['COMPLETED', 1],
    ],
    [
      ['CREATED', 0],
      ['CANCELED', 0],
    ],
    [
      ['CREATED', 0],
      ['FAILED', 0],
    ], // past its deadline before any claim
    // a transient failure or a capacity deferral releases it, a claim takes it again
    [
      ['CREATED', 0],
      ['IN_PROGRESS', 1],
      ['CREATED', 1],
      ['IN_PROGRESS', 2],
      ['FAILED', 2],
    ],
    // a lost lease: another worker takes it over under the next attempt
    [
      ['CREATED', 0],
      ['IN_PROGRESS', 1],
      ['IN_PROGRESS', 2],
      ['CANCELED', 2],
    ],
  ];
  for (const lifecycle of lifecycles) {
    const steps = lifecycle.map(([status, attempt]) => taskStepOf(at(status, attempt)));
    for (let i = 1; i < steps.length; i++) t.ok(steps[i] > steps[i - 1], `${JSON.stringify(lifecycle)}: ${steps}`);
  }
});

t.test('Last-Event-ID: our ids are numbers; anything else is no id', async (t) => {
  t.equal(parseLastEventId('7'), 7);
  t.equal(parseLastEventId(undefined), null);
  t.equal(parseLastEventId(''), null);
  t.equal(parseLastEventId('7a'), null);
  t.equal(parseLastEventId('1'.repeat(16)), null);
});

t.test('what a stream sends next', async (t) => {
  const running = at('IN_PROGRESS', 1);
  const done = at('COMPLETED', 1);
  t.equal(nextStreamEvent(running, null), 'task', 'a new stream starts with the task');
  t.equal(nextStreamEvent(running, taskStepOf(running)), 'wait', 'seen: wait for the next change');
  t.equal(nextStreamEvent(running, taskStepOf(at('CREATED', 0))), 'task', 'missed a change');
  t.equal(nextStreamEvent(running, 1000), 'task', 'an id beyond the task is not ours: the task as it is');
  t.equal(nextStreamEvent(done, taskStepOf(done)), 'done', 'the end seen: nothing but done');
});
