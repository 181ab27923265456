// Not in the PostgreSQL pass: the in-process task signals, no store.
import t from 'tap';
import { TaskEvents } from '../../src/services/task-events.js';

t.test("a claim wakes its task's waiters, not the listeners of any change", async (t) => {
  const events = new TaskEvents();
  const heard: string[] = [];
  events.onChanged('task-a', () => heard.push('task-a'));
  events.onChanged('task-b', () => heard.push('task-b'));
  events.onAnyChange(() => heard.push('any'));
  events.taskClaimed('task-a');
  t.same(heard, ['task-a'], 'a claim writes no outbox row: the webhook dispatcher has nothing to look for');
  events.taskChanged('task-b');
  t.same(heard, ['task-a', 'task-b', 'any']);
});
