import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import ipaddr from 'ipaddr.js';
import { Redis } from 'ioredis';
import { DomainError } from '../../core/errors.js';
import { withRouteHook } from '../route-hooks.js';
import type { AuthFailureLimiter } from './auth.js';

/**
 * Rate limits (DESIGN 3.8): two fixed-window budgets per API key, creates and every other request,
 * and a budget of failed authentications per client address. Counters live in process memory, or
 * in Redis when a client is given so that every API process shares them.
 *
 * The per-key budgets need `request.caller`: each route of the scope gets its budget's hook as a
 * route-level onRequest hook, which fastify runs after the scope's own (authentication). A route
 * joins the creates budget with `config: { rateLimitBudget: 'creates' }`.
 *
 * Every answer of a limited route carries the IETF draft headers RateLimit-Limit,
 * RateLimit-Remaining and RateLimit-Reset; a 429 also Retry-After. Counters in process memory
 * answer at once and the hooks take a callback, so a request waits for no promise here; Redis
 * answers through one. If Redis fails, the request is served without a limit (decision 0003).
 */
declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimitBudget?: 'creates' | 'requests';
  }
}

const WINDOW_MS = 60_000;
/** In-memory counters kept at most; past it the oldest windows are forgotten first. */
const MEMORY_COUNTERS_MAX_KEYS = 100_000;
/**
 * IPv6 clients are counted by their /64: one host usually holds a whole /64, and could otherwise
 * take a new address for every guess.
 */
const IPV6_CLIENT_PREFIX_LENGTH = 64;

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

export function registerRateLimits(scope: FastifyInstance, settings: RateLimitSettings): RateLimits {
  const counters: WindowCounters = settings.redis
    ? new RedisWindowCounters(settings.redis, `${settings.redisKeyPrefix}rl:`)
    : new MemoryWindowCounters(MEMORY_COUNTERS_MAX_KEYS);
  const creates = perKeyLimit(counters, 'creates', settings.createsPerMin);
  const requests = perKeyLimit(counters, 'requests', settings.requestsPerMin);

  // Each route gets its own budget's hook, rather than a hook on the scope that picks one per
  // request (BENCHMARKS.md, "Optimisations").
  scope.addHook('onRoute', (route) => {
    route.onRequest = withRouteHook(route.onRequest, route.config?.rateLimitBudget === 'creates' ? creates : requests);
  });

  return { authFailures: authFailureLimit(counters, settings.authFailuresPerMin) };
}

/** The onRequest hook of one per-key budget. A keyless request (a signed media URL) spends its address's budget. */
function perKeyLimit(counters: WindowCounters, budget: 'creates' | 'requests', max: number): onRequestHookHandler {
  const refusal = (retryAfter: number) =>
    new DomainError('rate_limited', `This API key may make ${max} ${budget} per minute; retry in ${retryAfter} s.`);
  return (request, reply, done) => {
    const key = `${budget}:${request.caller ? request.caller.keyId : `ip:${clientAddressOf(request)}`}`;
    whenCounted(
      counters.hit(key, WINDOW_MS),
      (window) => {
        const reset = secondsUntilReset(window);
        setLimitHeaders(reply, max, window.count, reset);
        if (window.count <= max) return done();
        reply.header('retry-after', reset);
        done(refusal(reset));
      },
      () => done(),
    );
  };
}

/** Counts failed authentications per client address, and shuts an address out once it has too many. */
function authFailureLimit(counters: WindowCounters, max: number): AuthFailureLimiter {
  const keyOf = (request: FastifyRequest) => `auth-failures:${clientAddressOf(request)}`;
  const refuseIfShutOut = (window: WindowCount, reply: FastifyReply): void => {
    if (window.count < max) return;
    const retryAfter = secondsUntilReset(window);
    setLimitHeaders(reply, max, window.count, retryAfter);
    reply.header('retry-after', retryAfter);
    throw new DomainError('rate_limited', `Too many failed authentication attempts from this address; retry in ${retryAfter} s.`);
  };
  return {
    assertAllowed(request, reply) {
      const counted = counters.peek(keyOf(request));
      if (!(counted instanceof Promise)) return refuseIfShutOut(counted, reply);
      return counted.then((window) => refuseIfShutOut(window, reply), failOpen);
    },
    async recordFailure(request) {
      await Promise.resolve(counters.hit(keyOf(request), WINDOW_MS)).catch(failOpen);
    },
  };
}

function setLimitHeaders(reply: FastifyReply, max: number, count: number, resetSeconds: number): void {
  reply.header('ratelimit-limit', max).header('ratelimit-remaining', Math.max(0, max - count)).header('ratelimit-reset', resetSeconds);
}

const secondsUntilReset = (window: WindowCount) => Math.max(1, Math.ceil(window.resetInMs / 1000));

/** Counters that cannot be reached do not limit (decision 0003): limits protect capacity, not money. */
function failOpen(): void {}

/** Calls then with a count that is already known without waiting for a promise. */
function whenCounted(counted: WindowCount | Promise<WindowCount>, then: (window: WindowCount) => void, failed: () => void): void {
  if (counted instanceof Promise) counted.then(then, failed);
  else then(counted);
}

/** The client's address as counted: IPv4-mapped IPv6 as IPv4, other IPv6 by its /64. */
function clientAddressOf(request: FastifyRequest): string {
  const ip = request.ip;
  if (!ip.includes(':')) return ip;
  if (!ipaddr.IPv6.isValid(ip)) return ip.toLowerCase();
  const address = ipaddr.IPv6.parse(ip);
  if (address.isIPv4MappedAddress()) return address.toIPv4Address().toString();
  const parts = address.toByteArray();
  parts.fill(0, IPV6_CLIENT_PREFIX_LENGTH / 8);
  return `${ipaddr.fromByteArray(parts).toString()}/${IPV6_CLIENT_PREFIX_LENGTH}`;
}

/** Opens the shared-counter connection; a REDIS_URL that cannot be reached stops the start. */
export async function connectRateLimitRedis(url: string, onError: (err: Error) => void): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    // Fail fast rather than queue: a request must not wait on an unreachable Redis (it is served
    // without a limit instead, see failOpen).
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

// ── counters ───────────────────────────────────────────────────────────────────────────────────

/** One fixed window of a key: the hits counted in it, and the time until it ends. */
export interface WindowCount {
  count: number;
  resetInMs: number;
}

/** Fixed-window counters. Every budget shares one set: the keys name their budget. */
export interface WindowCounters {
  /** Counts a hit of key in its current window, opening a window of windowMs if it has none. */
  hit(key: string, windowMs: number): WindowCount | Promise<WindowCount>;
  /** The key's current window without counting; a count of 0 when it has none. */
  peek(key: string): WindowCount | Promise<WindowCount>;
}

/**
 * Counters in process memory, answered at once. Each hit gets a snapshot of its count, so a burst
 * counted before any of its requests reads its result still refuses only the hits past the limit.
 */
export class MemoryWindowCounters implements WindowCounters {
  // Map order is insertion order and a window is re-inserted when it restarts, so the oldest
  // windows are always at the front.
  private readonly windows = new Map<string, { count: number; resetAt: number }>();

  constructor(private readonly maxKeys: number) {}

  hit(key: string, windowMs: number): WindowCount {
    const now = Date.now();
    let window = this.windows.get(key);
    if (!window || window.resetAt <= now) {
      this.windows.delete(key);
      window = { count: 0, resetAt: now + windowMs };
      this.windows.set(key, window);
      if (this.windows.size > this.maxKeys) this.evict(now);
    }
    window.count++;
    return { count: window.count, resetInMs: window.resetAt - now };
  }

  peek(key: string): WindowCount {
    const now = Date.now();
    const window = this.windows.get(key);
    return window && window.resetAt > now ? { count: window.count, resetInMs: window.resetAt - now } : { count: 0, resetInMs: 0 };
  }

  private evict(now: number): void {
    for (const [key, window] of this.windows) {
      if (this.windows.size <= this.maxKeys && window.resetAt > now) break;
      this.windows.delete(key);
    }
  }
}

/** Fixed-window counters in Redis: INCR with PEXPIRE on a window's first hit, in one Lua script. */
export class RedisWindowCounters implements WindowCounters {
  private readonly commands: Record<'imagegenRateLimitIncr' | 'imagegenRateLimitRead', (...args: (string | number)[]) => Promise<[number, number]>>;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    // defineCommand sends each script once and then calls it by its SHA.
    if (!('imagegenRateLimitIncr' in redis)) {
      redis.defineCommand('imagegenRateLimitIncr', {
        numberOfKeys: 1,
        lua: `
          local current = redis.call('INCR', KEYS[1])
          local ttl = redis.call('PTTL', KEYS[1])
          if current == 1 or ttl < 0 then
            redis.call('PEXPIRE', KEYS[1], ARGV[1])
            ttl = tonumber(ARGV[1])
          end
          return {current, ttl}`,
      });
      redis.defineCommand('imagegenRateLimitRead', {
        numberOfKeys: 1,
        lua: `
          local current = redis.call('GET', KEYS[1])
          if not current then return {0, 0} end
          local ttl = redis.call('PTTL', KEYS[1])
          if ttl < 0 then ttl = 0 end
          return {tonumber(current), ttl}`,
      });
    }
    this.commands = redis as unknown as RedisWindowCounters['commands'];
  }

  async hit(key: string, windowMs: number): Promise<WindowCount> {
    const [count, resetInMs] = await this.commands.imagegenRateLimitIncr(this.prefix + key, windowMs);
    return { count, resetInMs };
  }

  async peek(key: string): Promise<WindowCount> {
    const [count, resetInMs] = await this.commands.imagegenRateLimitRead(this.prefix + key);
    return { count, resetInMs };
  }
}
