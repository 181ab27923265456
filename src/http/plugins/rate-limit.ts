import rateLimit, { normalizeIP, type errorResponseBuilderContext } from '@fastify/rate-limit';
import type { FastifyInstance, onRequestAsyncHookHandler } from 'fastify';
import { Redis } from 'ioredis';
import { DomainError } from '../../core/errors.js';
import { withRouteHook } from '../route-hooks.js';
import type { AuthFailureLimiter } from './auth.js';

/**
 * Rate limits (DESIGN 3.8) on @fastify/rate-limit: two budgets per API key, creates and every
 * other request, and a budget of failed authentications per client address. Counters live in
 * process memory, or in Redis when a client is given so that every API process shares them.
 *
 * The per-key budgets need `request.caller`: each route of the scope gets its budget's hook as a
 * route-level onRequest hook, which fastify runs after the scope's own (authentication). A route
 * joins the creates budget with `config: { rateLimitBudget: 'creates' }`.
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimitBudget?: 'creates' | 'requests';
  }
}

const WINDOW_MS = 60_000;
/** In-memory counters kept at most; past it the oldest windows are forgotten first. */
const MEMORY_STORE_MAX_KEYS = 100_000;

export interface RateLimitSettings {
  createsPerMin: number;
  requestsPerMin: number;
  authFailuresPerMin: number;
  /** Shared counters; null = this process only. */
  redis: Redis | null;
  /** Prefix of the Redis keys (unique per deployment, or per test). */
  redisKeyPrefix: string;
}

export interface RateLimits {
  authFailures: AuthFailureLimiter;
}

export async function registerRateLimits(scope: FastifyInstance, settings: RateLimitSettings): Promise<RateLimits> {
  await scope.register(rateLimit, {
    // No hooks from the plugin itself: the onRoute hook below gives each route its budget's limiter,
    // which runs after authentication.
    global: false,
    // IETF draft headers: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset (+ Retry-After on 429).
    enableDraftSpec: true,
    // Limits protect capacity, not money (the store guards the balance): if Redis is down, serve.
    skipOnError: true,
    store: settings.redis ? redisRateLimitStore(settings.redis, `${settings.redisKeyPrefix}rl:`) : memoryRateLimitStore(MEMORY_STORE_MAX_KEYS),
  });

  const perKey = (budget: 'creates' | 'requests', max: number) =>
    scope.rateLimit({
      max,
      timeWindow: WINDOW_MS,
      // The budget name is part of the key: both budgets may share one store.
      // A keyless request (a signed media URL) has no caller; it spends its address's budget.
      keyGenerator: (request) => `${budget}:${request.caller ? request.caller.keyId : `ip:${normalizeIP(request.ip)}`}`,
      errorResponseBuilder: (_request, context: errorResponseBuilderContext) =>
        new DomainError('rate_limited', `This API key may make ${context.max} ${budget === 'creates' ? 'creates' : 'requests'} per minute; retry in ${context.after}.`),
    }) as unknown as onRequestAsyncHookHandler;
  const creates = perKey('creates', settings.createsPerMin);
  const requests = perKey('requests', settings.requestsPerMin);

  const authFailureCounter = scope.createRateLimit({
    max: settings.authFailuresPerMin,
    timeWindow: WINDOW_MS,
    keyGenerator: (request) => `auth-failures:${normalizeIP(request.ip)}`,
  });

  // Each route gets its own budget's limiter as it is, rather than a hook on the scope that picks one
  // per request: one async hook less on every request (BENCHMARKS.md, "Optimisations").
  scope.addHook('onRoute', (route) => {
    const limit = route.config?.rateLimitBudget === 'creates' ? creates : requests;
    route.onRequest = withRouteHook(route.onRequest, limit);
  });

  return {
    authFailures: {
      async assertAllowed(request, reply) {
        const state = await authFailureCounter(request, { increment: false });
        if (state.isAllowed || state.remaining > 0) return;
        const retryAfter = Math.max(1, state.ttlInSeconds);
        reply.header('ratelimit-limit', state.max).header('ratelimit-remaining', 0).header('ratelimit-reset', retryAfter).header('retry-after', retryAfter);
        throw new DomainError('rate_limited', `Too many failed authentication attempts from this address; retry in ${retryAfter} s.`);
      },
      async recordFailure(request) {
        await authFailureCounter(request);
      },
    },
  };
}

/** Opens the shared-counter connection; a REDIS_URL that cannot be reached stops the start. */
export async function connectRateLimitRedis(url: string, onError: (err: Error) => void): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    // Fail fast rather than queue: a request must not wait on an unreachable Redis (it is served
    // without a limit instead, see skipOnError above).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 1_000,
  });
  redis.on('error', onError);
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new Error(`REDIS_URL: cannot connect to Redis (${(err as Error).message}).`);
  }
  return redis;
}

type CounterResult = { current: number; ttl: number };
type CounterCallback = (error: Error | null, result?: CounterResult) => void;

/**
 * Fixed-window counters in process memory. The plugin's own LocalStore hands every caller the same
 * mutable counter object, so when a burst of requests is counted before any of them reads its
 * result, all of them read the final count and the whole burst is refused (a burst of 30 against
 * a limit of 5 gets thirty 429s). This store answers with a snapshot.
 */
function memoryRateLimitStore(maxKeys: number) {
  // Map order is insertion order and a window is re-inserted when it restarts, so the oldest
  // windows are always at the front.
  const windows = new Map<string, { count: number; resetAt: number }>();
  const evict = (now: number) => {
    for (const [key, window] of windows) {
      if (windows.size <= maxKeys && window.resetAt > now) break;
      windows.delete(key);
    }
  };
  return class MemoryRateLimitStore {
    incr(key: string, cb: CounterCallback, timeWindow: number): void {
      const now = Date.now();
      let window = windows.get(key);
      if (!window || window.resetAt <= now) {
        windows.delete(key);
        window = { count: 0, resetAt: now + timeWindow };
        windows.set(key, window);
        if (windows.size > maxKeys) evict(now);
      }
      window.count++;
      cb(null, { current: window.count, ttl: window.resetAt - now });
    }

    read(key: string, cb: CounterCallback): void {
      const now = Date.now();
      const window = windows.get(key);
      cb(null, window && window.resetAt > now ? { current: window.count, ttl: window.resetAt - now } : { current: 0, ttl: 0 });
    }

    /** One map for every limiter: the keys already name their budget. */
    child(): MemoryRateLimitStore {
      return this;
    }
  };
}

/**
 * A fixed-window counter in Redis, in the shape @fastify/rate-limit expects of a store. The
 * plugin's own Redis store derives child key prefixes from route info that limiters made with
 * `rateLimit()` do not have; this one keeps one flat prefix because the keys already name their budget.
 */
function redisRateLimitStore(redis: Redis, prefix: string) {
  const incrScript = `
    local current = redis.call('INCR', KEYS[1])
    local ttl = redis.call('PTTL', KEYS[1])
    if current == 1 or ttl < 0 then
      redis.call('PEXPIRE', KEYS[1], ARGV[1])
      ttl = tonumber(ARGV[1])
    end
    return {current, ttl}`;
  const readScript = `
    local current = redis.call('GET', KEYS[1])
    if not current then return {0, 0} end
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl < 0 then ttl = 0 end
    return {tonumber(current), ttl}`;
  // defineCommand sends each script once and then calls it by its SHA.
  if (!('imagegenRateLimitIncr' in redis)) {
    redis.defineCommand('imagegenRateLimitIncr', { numberOfKeys: 1, lua: incrScript });
    redis.defineCommand('imagegenRateLimitRead', { numberOfKeys: 1, lua: readScript });
  }
  const commands = redis as unknown as Record<'imagegenRateLimitIncr' | 'imagegenRateLimitRead', (...args: (string | number)[]) => Promise<[number, number]>>;
  const settle = (pending: Promise<[number, number]>, cb: CounterCallback) =>
    pending.then(
      ([current, ttl]) => cb(null, { current, ttl }),
      (err: Error) => cb(err),
    );

  return class RedisRateLimitStore {
    incr(key: string, cb: CounterCallback, timeWindow: number): void {
      settle(commands.imagegenRateLimitIncr(prefix + key, timeWindow), cb);
    }

    read(key: string, cb: CounterCallback): void {
      settle(commands.imagegenRateLimitRead(prefix + key), cb);
    }

    child(): RedisRateLimitStore {
      return new RedisRateLimitStore();
    }
  };
}
