import t from 'tap';
import { afterFailedAttempt, type AttemptFailure } from '../../src/core/task-retry.js';

const createdAt = new Date('2026-01-01T12:00:00Z');
const after = (ms: number) => new Date(createdAt.getTime() + ms);
const policy = { now: after(10_000), deadlineMs: 60_000, maxAttempts: 3, retryBaseMs: 1000, random: () => 0.5 };
const task = (attempt: number, deferredAttempts = 0) => ({ attempt, deferredAttempts, createdAt });
const generation = (over: Partial<AttemptFailure & { kind: 'generation' }> = {}): AttemptFailure => ({
  kind: 'generation',
  code: 'upstream_error',
  message: 'The provider failed.',
  transient: true,
  ...over,
});

t.test('a dependency away defers the task without spending an attempt, until its deadline', async (t) => {
  t.same(afterFailedAttempt(task(1, 2), { kind: 'dependency' }, policy), { action: 'defer', delayMs: 4000 });
  t.match(afterFailedAttempt(task(1), { kind: 'dependency' }, { ...policy, now: after(60_000) }), {
    action: 'fail',
    error: { code: 'deadline_exceeded' },
    waitPastDeadline: false,
  });
});

t.test('a transient failure retries while attempts remain, then fails with its own error', async (t) => {
  t.same(afterFailedAttempt(task(2), generation(), policy), { action: 'retry', delayMs: 2000 });
  t.same(afterFailedAttempt(task(3), generation(), policy), {
    action: 'fail',
    error: { code: 'upstream_error', message: 'The provider failed.' },
    waitPastDeadline: false,
  });
  t.same(
    afterFailedAttempt(task(4, 2), generation(), policy),
    { action: 'retry', delayMs: 8000 },
    'deferred claims spent no attempt',
  );
  t.match(
    afterFailedAttempt(task(1), generation({ maxAttempts: 1 }), policy),
    { action: 'fail' },
    'the failure’s own cap',
  );
});

t.test('a permanent failure fails at once', async (t) => {
  t.match(afterFailedAttempt(task(1), generation({ transient: false, code: 'content_policy' }), policy), {
    action: 'fail',
    error: { code: 'content_policy' },
  });
});

t.test('a provider at capacity defers, no sooner than its Retry-After', async (t) => {
  t.same(afterFailedAttempt(task(1), generation({ capacity: true, retryAfterMs: 7000 }), policy), {
    action: 'defer',
    delayMs: 7000,
  });
  t.same(afterFailedAttempt(task(1), generation({ capacity: true, transient: false }), policy), {
    action: 'defer',
    delayMs: 1000,
  });
});

t.test('a Retry-After that ends past the deadline fails the task now', async (t) => {
  for (const over of [{ capacity: true }, { transient: true }]) {
    t.same(afterFailedAttempt(task(1), generation({ ...over, retryAfterMs: 50_000 }), policy), {
      action: 'fail',
      error: { code: 'deadline_exceeded', message: 'The task could not be completed in time.' },
      waitPastDeadline: true,
    });
  }
  t.same(afterFailedAttempt(task(1), generation({ retryAfterMs: 49_999 }), policy), {
    action: 'retry',
    delayMs: 49_999,
  });
});
