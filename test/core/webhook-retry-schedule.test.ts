import t from 'tap';
import { nextWebhookAttemptAt, WEBHOOK_RETRY_DELAYS_MS } from '../../src/core/webhook-retry-schedule.js';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const noJitter = () => 0.5;
const delayOf = (at: Date | null) => (at === null ? null : at.getTime() - NOW.getTime());

t.test('schedule is immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h', async (t) => {
  const s = 1000;
  const h = 3600 * s;
  t.same(WEBHOOK_RETRY_DELAYS_MS, [0, 5 * s, 300 * s, 1800 * s, 2 * h, 5 * h, 10 * h, 14 * h, 20 * h, 24 * h]);
  for (const [attemptsMade, delayMs] of WEBHOOK_RETRY_DELAYS_MS.entries()) {
    t.equal(delayOf(nextWebhookAttemptAt(attemptsMade, NOW, noJitter)), delayMs, `after ${attemptsMade} attempts`);
  }
});

t.test('jitter stays within ±10 %', async (t) => {
  for (const [attemptsMade, delayMs] of WEBHOOK_RETRY_DELAYS_MS.entries()) {
    const earliest = delayOf(nextWebhookAttemptAt(attemptsMade, NOW, () => 0))!;
    const latest = delayOf(nextWebhookAttemptAt(attemptsMade, NOW, () => 0.999999))!;
    t.equal(earliest, Math.round(delayMs * 0.9), `earliest after ${attemptsMade} attempts`);
    t.ok(latest <= delayMs * 1.1 && latest >= delayMs, `latest after ${attemptsMade} attempts`);
  }
});

t.test('exhausted after 10 attempts', async (t) => {
  t.equal(WEBHOOK_RETRY_DELAYS_MS.length, 10);
  t.not(nextWebhookAttemptAt(9, NOW, noJitter), null);
  t.equal(nextWebhookAttemptAt(10, NOW, noJitter), null);
  t.equal(nextWebhookAttemptAt(11, NOW, noJitter), null);
});

t.test('scale shrinks the schedule', async (t) => {
  t.equal(delayOf(nextWebhookAttemptAt(9, NOW, noJitter, 0.001)), 86_400);
  t.equal(delayOf(nextWebhookAttemptAt(1, NOW, noJitter, 0.001)), 5);
});

t.test('rejects a negative or fractional attempt count', async (t) => {
  t.throws(() => nextWebhookAttemptAt(-1, NOW, noJitter), RangeError);
  t.throws(() => nextWebhookAttemptAt(1.5, NOW, noJitter), RangeError);
});
