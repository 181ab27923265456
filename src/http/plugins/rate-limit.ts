import { ConfigError } from '../../config.js';
import rateLimit, { normalizeIP, type RateLimitOptions, type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { DomainError, RetryLaterError } from '../../core/errors.js';
import type { AuthFailureLimiter } from './auth.js';

/**
 * Rate limits (docs/design.md §3.8) on @fastify/rate-limit: two fixed-window budgets per API key, creates
 * and every other request, and a budget of failed authentications per client address. Counters live
 * in process memory, or in Redis (the plugin's RedisStore) so that every API process shares them.
 *
 * Every route of the scope spends the requests budget; a route that names `creates` as its
 * `config.rateLimit` spends that one instead. The plugin adds its hook to each route as a
 * route-level onRequest hook, which fastify runs after the scope's own (authentication), so the
 * key is the caller's. Headers are the IETF draft's (RateLimit-Limit, -Remaining, -Reset, and
 * Retry-After on a 429); the 429 is a DomainError sent by the one error handler. When Redis does
 * not answer, a request is served without a limit (decision 0003).
 */
const WINDOW_MS = 60_000;
/** Counters kept in process memory at most, per budget; the least recently used go first. */
const MEMORY_COUNTERS_MAX_KEYS = 100_000;

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
  /** The route config (`config.rateLimit`) of a route that spends the creates budget. */
  creates: RateLimitOptions;
  /**
   * Spends one create of the caller's creates budget for a create that does not arrive on a route
   * of its own (the MCP tool generate_image); throws RateLimitedError beyond it. Counted per route
   * like every budget of the plugin, so it is a budget of the same size as the REST create's.
   */
  spendCreate(request: FastifyRequest): Promise<void>;
  authFailures: AuthFailureLimiter;
}

/** A 429 with the seconds its window still runs (what Retry-After says on REST). */
export class RateLimitedError extends RetryLaterError {
  constructor(message: string, retryAfterSeconds: number) {
    super('rate_limited', message, retryAfterSeconds);
  }
}

/** The budget's key of a request: its API key's, or, keyless (a signed media URL), its address's. */
const perKey = (budget: string) => (request: FastifyRequest) =>
  `${budget}:${request.caller ? request.caller.keyId : `ip:${normalizeIP(request.ip)}`}`;

const refusal = (budget: string) => (_request: FastifyRequest, context: { after: string; max: number }) =>
  new DomainError(
    'rate_limited',
    `This API key may make ${context.max} ${budget} per minute; retry in ${context.after}.`,
  );

/**
 * A budget's size for a request: the key's own limit when it has one (docs/design.md §3.11), else
 * the service's. A keyless request (a signed media URL) gets the service's.
 */
const limitOf =
  (own: 'createsPerMin' | 'requestsPerMin', otherwise: number) =>
  (request: FastifyRequest): number =>
    request.caller?.scope.rateLimits[own] ?? otherwise;

export async function registerRateLimits(scope: FastifyInstance, settings: RateLimitSettings): Promise<RateLimits> {
  const counters: Partial<RateLimitPluginOptions> = settings.redis
    ? { redis: settings.redis, nameSpace: `${settings.redisKeyPrefix}rl:` }
    : { store: SnapshotLocalStore as unknown as RateLimitPluginOptions['store'] };
  await scope.register(rateLimit, {
    ...counters,
    global: true,
    max: limitOf('requestsPerMin', settings.requestsPerMin),
    timeWindow: WINDOW_MS,
    keyGenerator: perKey('requests'),
    errorResponseBuilder: refusal('requests'),
    enableDraftSpec: true,
    // Limits protect capacity, not money (the store guards the balance): if Redis is down, serve.
    skipOnError: true,
  });

  const authFailures = scope.createRateLimit({
    max: settings.authFailuresPerMin,
    timeWindow: WINDOW_MS,
    // normalizeIP counts an IPv6 client by its /64 and an IPv4-mapped address as the IPv4 one.
    keyGenerator: (request) => `auth-failures:${normalizeIP(request.ip)}`,
  });

  const createsCounter = scope.createRateLimit({
    max: limitOf('createsPerMin', settings.createsPerMin),
    timeWindow: WINDOW_MS,
    keyGenerator: perKey('creates'),
  });

  return {
    async spendCreate(request) {
      const state = await createsCounter(request);
      if (state.isAllowed || !state.isExceeded) return;
      const retryAfter = Math.max(1, state.ttlInSeconds);
      throw new RateLimitedError(
        `This API key may make ${state.max} creates per minute; retry in ${retryAfter} s.`,
        retryAfter,
      );
    },
    creates: {
      max: limitOf('createsPerMin', settings.createsPerMin),
      keyGenerator: perKey('creates'),
      errorResponseBuilder: refusal('creates'),
    },
    authFailures: {
      async assertAllowed(request, reply) {
        const state = await authFailures(request, { increment: false });
        if (state.isAllowed || state.remaining > 0) return;
        const retryAfter = Math.max(1, state.ttlInSeconds);
        reply
          .header('ratelimit-limit', state.max)
          .header('ratelimit-remaining', 0)
          .header('ratelimit-reset', retryAfter);
        reply.header('retry-after', retryAfter);
        throw new DomainError(
          'rate_limited',
          `Too many failed authentication attempts from this address; retry in ${retryAfter} s.`,
        );
      },
      async recordFailure(request) {
        await authFailures(request);
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
    // A configuration the process cannot start with: the CLI prints it as such, without a stack.
    throw new ConfigError(`REDIS_URL: cannot connect to Redis (${(err as Error).message}).`);
  }
  return redis;
}

type CounterResult = { current: number; ttl: number };
type CounterCallback = (error: Error | null, result?: CounterResult) => void;

/**
 * A store of counters in process memory, in the shape @fastify/rate-limit expects (`incr`, `read`,
 * `child`). The plugin's own LocalStore calls back with its *mutable* counter object, which the
 * plugin reads a microtask later: a burst counted before any of its requests reads its result would
 * all read the final count, and the whole burst would be refused (thirty 429s for 30 concurrent
 * creates against a limit of 5). This one calls back with a snapshot.
 */
export class SnapshotLocalStore {
  // Map order is insertion order and a window is re-inserted when it restarts, so the oldest
  // windows are always at the front.
  private readonly windows = new Map<string, { count: number; resetAt: number }>();

  private readonly maxKeys: number;

  /** The plugin constructs its store with its own options object, hence the default. */
  constructor(maxKeys: unknown = MEMORY_COUNTERS_MAX_KEYS) {
    this.maxKeys = typeof maxKeys === 'number' ? maxKeys : MEMORY_COUNTERS_MAX_KEYS;
  }

  incr(key: string, cb: CounterCallback, timeWindow: number): void {
    const now = Date.now();
    let window = this.windows.get(key);
    if (!window || window.resetAt <= now) {
      this.windows.delete(key);
      window = { count: 0, resetAt: now + timeWindow };
      this.windows.set(key, window);
      if (this.windows.size > this.maxKeys) this.evict(now);
    }
    window.count++;
    cb(null, { current: window.count, ttl: window.resetAt - now });
  }

  read(key: string, cb: CounterCallback): void {
    const now = Date.now();
    const window = this.windows.get(key);
    cb(
      null,
      window && window.resetAt > now ? { current: window.count, ttl: window.resetAt - now } : { current: 0, ttl: 0 },
    );
  }

  /** A budget (a route's config or a limiter of its own) counts in a store of its own. */
  child(): SnapshotLocalStore {
    return new SnapshotLocalStore(this.maxKeys);
  }

  private evict(now: number): void {
    for (const [key, window] of this.windows) {
      if (this.windows.size <= this.maxKeys && window.resetAt > now) break;
      this.windows.delete(key);
    }
  }
}
