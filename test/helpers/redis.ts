import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { Redis } from 'ioredis';

/** The Redis the shared-counter tests use; they are skipped, not failed, where none answers. */
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** tap options for a test that needs REDIS_URL: skipped, with the reason, where no Redis answers. */
export async function needsRedis(): Promise<{ skip: string | false }> {
  const probe = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    await probe.ping();
    return { skip: false };
  } catch {
    return { skip: `no Redis at ${REDIS_URL}` };
  } finally {
    probe.disconnect();
  }
}

/** A connection and a key prefix unique to this test; every key under the prefix is deleted at the end. */
export function redisWithPrefix(t: Test): { redis: Redis; prefix: string } {
  const redis = new Redis(REDIS_URL);
  const prefix = `imagegen-test:${randomUUID()}:`;
  t.teardown(async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 100);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    redis.disconnect();
  });
  return { redis, prefix };
}
