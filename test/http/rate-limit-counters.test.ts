import t from 'tap';
import type { Test } from 'tap';
import { MemoryWindowCounters, RedisWindowCounters, type WindowCounters } from '../../src/http/plugins/rate-limit.js';
import { needsRedis, redisWithPrefix } from '../helpers/redis.js';

/**
 * The rate limits' counters have two adapters, process memory and Redis; both must count the same
 * way (one contract, run against each).
 */
const WINDOW_MS = 60_000;

function windowCountersContract(t: Test, make: (t: Test) => Promise<WindowCounters>): void {
  t.test('hits are counted one by one in a window, each answered with its own count', async (t) => {
    const counters = await make(t);
    const counts = [];
    for (let i = 0; i < 3; i++) counts.push(await counters.hit('creates:key-a', WINDOW_MS));
    t.same(counts.map((c) => c.count), [1, 2, 3]);
    for (const c of counts) t.ok(c.resetInMs > 0 && c.resetInMs <= WINDOW_MS, `the window ends within its length (${c.resetInMs} ms)`);
  });

  t.test('a peek reads the count without adding to it, and a key never hit reads 0', async (t) => {
    const counters = await make(t);
    await counters.hit('auth-failures:198.51.100.7', WINDOW_MS);
    t.equal((await counters.peek('auth-failures:198.51.100.7')).count, 1);
    t.equal((await counters.peek('auth-failures:198.51.100.7')).count, 1, 'still 1');
    t.same(await counters.peek('auth-failures:203.0.113.1'), { count: 0, resetInMs: 0 });
  });

  t.test('keys are counted apart', async (t) => {
    const counters = await make(t);
    await counters.hit('creates:key-a', WINDOW_MS);
    await counters.hit('creates:key-a', WINDOW_MS);
    t.equal((await counters.hit('requests:key-a', WINDOW_MS)).count, 1, 'another budget of the same key');
    t.equal((await counters.hit('creates:key-b', WINDOW_MS)).count, 1, 'the same budget of another key');
  });
}

t.test('in process memory', async (t) => {
  windowCountersContract(t, async () => new MemoryWindowCounters(1000));

  t.test('answers at once, and keeps at most its number of keys, the oldest windows going first', async (t) => {
    const counters = new MemoryWindowCounters(2);
    t.notOk(counters.hit('a', WINDOW_MS) instanceof Promise);
    counters.hit('b', WINDOW_MS);
    counters.hit('c', WINDOW_MS);
    t.equal(counters.peek('a').count, 0, 'the oldest was forgotten');
    t.equal(counters.peek('b').count, 1);
    t.equal(counters.peek('c').count, 1);
  });
});

t.test('in Redis', await needsRedis(), async (t) => {
  windowCountersContract(t, async (t) => {
    const { redis, prefix } = redisWithPrefix(t);
    return new RedisWindowCounters(redis, `${prefix}rl:`);
  });
});
