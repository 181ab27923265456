import t from 'tap';
import {
  durationMs,
  goDurationMs,
  googleFailure,
  rateLimitResetMs,
  retryAfterMs,
} from '../../src/generators/provider-errors.js';

const now = new Date('2026-11-24T12:00:00Z');

t.test('Retry-After in seconds or as an HTTP date; anything else is ignored', async (t) => {
  t.equal(retryAfterMs('7', now), 7000);
  t.equal(retryAfterMs(' 0 ', now), 0);
  t.equal(retryAfterMs('Tue, 24 Nov 2026 12:00:30 GMT', now), 30_000);
  t.equal(retryAfterMs('Tue, 24 Nov 2026 11:00:00 GMT', now), 0, 'a date in the past means now');
  t.equal(retryAfterMs('soon', now), undefined);
  t.equal(retryAfterMs('-5', now), undefined);
  t.equal(retryAfterMs(null, now), undefined);
});

t.test('google.rpc.RetryInfo durations', async (t) => {
  t.equal(durationMs('37s'), 37_000);
  t.equal(durationMs('1.5s'), 1500);
  t.equal(durationMs('5m'), undefined);
  t.equal(durationMs(12), undefined);
});

t.test('Go durations as in x-ratelimit-reset-*', async (t) => {
  t.equal(goDurationMs('1s'), 1000);
  t.equal(goDurationMs('6m0s'), 360_000);
  t.equal(goDurationMs('20ms'), 20);
  t.equal(goDurationMs('1h2m3.5s'), 3_723_500);
  t.equal(goDurationMs('12'), undefined);
  t.equal(goDurationMs('soon'), undefined);
  t.equal(goDurationMs(null), undefined);
});

t.test('an exhausted x-ratelimit-* limit counts as a Retry-After; one with calls left does not', async (t) => {
  const headers = (h: Record<string, string>) => (name: string) => h[name];
  t.equal(
    rateLimitResetMs(headers({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '12s' })),
    12_000,
  );
  t.equal(
    rateLimitResetMs(
      headers({
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': '1s',
        'x-ratelimit-remaining-tokens': '0',
        'x-ratelimit-reset-tokens': '6m0s',
      }),
    ),
    360_000,
    'the later reset when both are exhausted',
  );
  t.equal(
    rateLimitResetMs(headers({ 'x-ratelimit-remaining-requests': '3', 'x-ratelimit-reset-requests': '12s' })),
    undefined,
  );
  t.equal(rateLimitResetMs(headers({})), undefined);
});

t.test('Google errors are classified from the body, not only the status', async (t) => {
  const info = (reason: string) => ({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason });
  const quota = (quotaId: string, quotaValue?: string) => ({
    '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
    violations: [{ quotaId, ...(quotaValue ? { quotaValue } : {}) }],
  });
  t.match(googleFailure(400, { status: 'INVALID_ARGUMENT', details: [info('API_KEY_INVALID')] }), {
    code: 'generator_unavailable',
    transient: false,
  });
  t.match(googleFailure(400, { status: 'FAILED_PRECONDITION' }), { code: 'generator_unavailable' });
  t.match(googleFailure(400, { status: 'INVALID_ARGUMENT' }), { code: 'upstream_rejected' });
  t.match(googleFailure(429, { details: [quota('GenerateRequestsPerDayPerProjectPerModel')] }), {
    code: 'upstream_quota_exhausted',
    transient: false,
    capacity: undefined,
  });
  t.match(googleFailure(429, { details: [quota('GenerateRequestsPerMinutePerProjectPerModel', '0')] }), {
    code: 'generator_unavailable',
  });
  t.match(googleFailure(429, { message: 'Quota exceeded for metric: x, limit: 0, model: y' }), {
    code: 'generator_unavailable',
  });
  t.match(googleFailure(429, { details: [quota('GenerateRequestsPerMinutePerProjectPerModel')] }), {
    code: 'upstream_rate_limited',
    capacity: true,
  });
  t.match(googleFailure(429, undefined), { code: 'upstream_rate_limited', capacity: true });
  t.match(googleFailure(503, { status: 'UNAVAILABLE' }), { code: 'upstream_unavailable', capacity: true });
});
