import t from 'tap';
import { idempotencyKeyDecision, type StoredIdempotencyKey } from '../../src/core/idempotency-key.js';

const now = new Date('2026-01-01T12:00:00Z');
const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);
const stored = (over: Partial<StoredIdempotencyKey> = {}): StoredIdempotencyKey => ({
  fingerprint: 'POST /api/v1/images/generations sha256:aa',
  status: 'in_flight',
  leaseExpiresAt: at(30_000),
  expiresAt: at(3_600_000),
  ...over,
});
const same = stored().fingerprint;

t.test('a key never used starts with this request', async (t) => {
  t.equal(idempotencyKeyDecision(null, same, now), 'start');
});

t.test('an expired key starts a new life, whatever it held', async (t) => {
  t.equal(idempotencyKeyDecision(stored({ expiresAt: now, status: 'completed' }), 'other', now), 'start');
  t.equal(idempotencyKeyDecision(stored({ expiresAt: at(-1) }), same, now), 'start');
});

t.test('a live key used with another request is a mismatch, before anything else', async (t) => {
  t.equal(idempotencyKeyDecision(stored(), 'POST /api/v1/media sha256:bb', now), 'fingerprint_mismatch');
  t.equal(idempotencyKeyDecision(stored({ status: 'completed' }), 'other', now), 'fingerprint_mismatch');
});

t.test('a completed key replays its response', async (t) => {
  t.equal(idempotencyKeyDecision(stored({ status: 'completed', leaseExpiresAt: null }), same, now), 'replay');
});

t.test('an in-flight key whose lease is live is in progress', async (t) => {
  t.equal(idempotencyKeyDecision(stored({ leaseExpiresAt: at(1) }), same, now), 'in_progress');
});

t.test('an in-flight key whose lease ran out is taken over', async (t) => {
  t.equal(idempotencyKeyDecision(stored({ leaseExpiresAt: now }), same, now), 'take_over');
  t.equal(idempotencyKeyDecision(stored({ leaseExpiresAt: null }), same, now), 'take_over');
});
