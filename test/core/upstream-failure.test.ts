import t from 'tap';
import { generationRetryDelayMs } from '../../src/core/task-retry.js';
import { upstreamFailureOfStatus } from '../../src/core/upstream-failure.js';

t.test(
  'HTTP statuses: 429, 408 and 5xx are transient; credentials and model refusals and other 4xx are not',
  async (t) => {
    t.match(upstreamFailureOfStatus(429), { code: 'upstream_rate_limited', transient: true });
    t.match(upstreamFailureOfStatus(408), { code: 'upstream_unavailable', transient: true });
    t.match(upstreamFailureOfStatus(500), { code: 'upstream_unavailable', transient: true });
    t.match(upstreamFailureOfStatus(503), { code: 'upstream_unavailable', transient: true });
    for (const status of [401, 403, 404])
      t.match(upstreamFailureOfStatus(status), { code: 'generator_unavailable', transient: false });
    for (const status of [400, 413, 422])
      t.match(upstreamFailureOfStatus(status), { code: 'upstream_rejected', transient: false });
  },
);

t.test('429 and an overloaded 503 are refusals for capacity; other failures are not', async (t) => {
  t.equal(upstreamFailureOfStatus(429).capacity, true);
  t.equal(upstreamFailureOfStatus(503).capacity, true);
  for (const status of [400, 401, 408, 500, 502, 504]) t.notOk(upstreamFailureOfStatus(status).capacity, `${status}`);
});

t.test('a retry waits at least the upstream Retry-After, and at least its own backoff', async (t) => {
  const middle = () => 0.5;
  t.equal(generationRetryDelayMs(1, 2000, middle), 2000);
  t.equal(generationRetryDelayMs(1, 2000, middle, 30_000), 30_000);
  t.equal(generationRetryDelayMs(3, 2000, middle, 1000), 8000);
});
