// Not in the PostgreSQL pass: the rate-limit plugin's counters (in memory and in Redis), no store.
import t from 'tap';
import type { Test } from 'tap';
import Fastify, { type FastifyRequest } from 'fastify';
import rateLimit, { type RateLimitPluginOptions } from '@fastify/rate-limit';
import { SnapshotLocalStore } from '../../src/http/plugins/rate-limit.js';
import { needsRedis, redisWithPrefix } from '../helpers/redis.js';

/**
 * The rate limits' counters have two adapters behind @fastify/rate-limit, our snapshot store in
 * process memory and the plugin's RedisStore; both must count the same way (one contract, run
 * against each, through the plugin's own createRateLimit).
 */
const WINDOW_MS = 60_000;

type Limiter = (key: string, options?: { increment: boolean }) => Promise<{ current: number; ttl: number }>;

async function limiterOver(t: Test, counters: Partial<RateLimitPluginOptions>, max = 1000): Promise<Limiter> {
  const app = Fastify();
  t.teardown(() => app.close());
  await app.register(rateLimit, { ...counters, global: false });
  await app.ready();
  const check = app.createRateLimit({ max, timeWindow: WINDOW_MS, keyGenerator: (request) => request.ip });
  return async (key, options) => {
    const state = await check({ ip: key, routeOptions: { config: {} } } as unknown as FastifyRequest, options);
    if (state.isAllowed) throw new Error('no limit applied');
    return { current: state.max - state.remaining, ttl: state.ttl };
  };
}

function countersContract(t: Test, counters: (t: Test) => Partial<RateLimitPluginOptions>): void {
  t.test('hits are counted one by one in a window, each answered with its own count', async (t) => {
    const hit = await limiterOver(t, counters(t));
    const counts = await Promise.all([hit('creates:key-a'), hit('creates:key-a'), hit('creates:key-a')]);
    t.same(counts.map((c) => c.current).sort(), [1, 2, 3], 'a burst counted before any reads its result');
    for (const c of counts) t.ok(c.ttl > 0 && c.ttl <= WINDOW_MS, `the window ends within its length (${c.ttl} ms)`);
  });

  t.test('a peek reads the count without adding to it, and a key never hit reads 0', async (t) => {
    const hit = await limiterOver(t, counters(t));
    await hit('auth-failures:198.51.100.7');
    t.equal((await hit('auth-failures:198.51.100.7', { increment: false })).current, 1);
    t.equal((await hit('auth-failures:198.51.100.7', { increment: false })).current, 1, 'still 1');
    t.same(await hit('auth-failures:203.0.113.1', { increment: false }), { current: 0, ttl: 0 });
  });

  t.test('keys are counted apart', async (t) => {
    const hit = await limiterOver(t, counters(t));
    await hit('creates:key-a');
    await hit('creates:key-a');
    t.equal((await hit('requests:key-a')).current, 1, 'another budget of the same key');
    t.equal((await hit('creates:key-b')).current, 1, 'the same budget of another key');
  });
}

t.test('in process memory', async (t) => {
  countersContract(t, () => ({ store: SnapshotLocalStore as unknown as RateLimitPluginOptions['store'] }));

  t.test('keeps at most its number of keys, the oldest windows going first', async (t) => {
    const store = new SnapshotLocalStore(2);
    const read = (key: string) =>
      new Promise<number>((resolve) => store.read(key, (_err, res) => resolve(res!.current)));
    for (const key of ['a', 'b', 'c']) store.incr(key, () => {}, WINDOW_MS);
    t.equal(await read('a'), 0, 'the oldest was forgotten');
    t.equal(await read('b'), 1);
    t.equal(await read('c'), 1);
  });
});

t.test('in Redis', await needsRedis(), async (t) => {
  countersContract(t, (t) => {
    const { redis, prefix } = redisWithPrefix(t);
    return { redis, nameSpace: `${prefix}rl:` };
  });
});
