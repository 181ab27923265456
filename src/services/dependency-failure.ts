/**
 * Whether an error means a dependency (the store, the blob store, Redis, the local disk) cannot
 * serve right now, as opposed to a bug or a bad request: the one place that knows the failure
 * shapes of `pg`, `better-sqlite3`, the AWS SDK, node's `fs` and `net`, and ioredis. What is
 * classified here is answered 503 with Retry-After (docs/design.md §3.7): a client, an SDK or a load
 * balancer reads that as "come back shortly", where a 500 reads as "a bug".
 *
 * - `unreachable`: the dependency did not answer or dropped the connection (refused, reset,
 *   timed out, shutting down, out of connections, busy past its timeout).
 * - `storage_full`: a write found no space (ENOSPC, SQLITE_FULL, PostgreSQL's disk_full).
 */
export type DependencyFailure = 'unreachable' | 'storage_full';

/** node's net and fs, and the libuv codes under both. */
const UNREACHABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'EIO',
  'EMFILE',
  'ENFILE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);
const FULL_ERRNO = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);

/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), admin / crash shutdown, cannot connect
 * now, too many connections, out of memory; 53100 is disk_full.
 */
const UNREACHABLE_SQLSTATE = /^(08...|57P0[123]|53300|53200)$/;
const FULL_SQLSTATE = '53100';

/** better-sqlite3's codes: busy past busy_timeout, locked, an I/O error of any kind, cannot open. */
const UNREACHABLE_SQLITE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|PROTOCOL)(_[A-Z_]+)?$/;

/** pg's own messages for a connection that is gone or never came (no code of their own). */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'timeout exceeded when trying to connect',
  'Client was closed and is not queryable',
];

/** ioredis: a command given up after its retries, or sent on a closed connection. */
const REDIS_MESSAGES = ['Connection is closed.', "Stream isn't writeable and enableOfflineQueue options is false"];
const REDIS_NAMES = new Set(['MaxRetriesPerRequestError']);

/** The AWS SDK's names for a server that is busy or away, and the HTTP statuses that mean it. */
const AWS_UNAVAILABLE_NAMES = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'ThrottlingException',
]);
const UNAVAILABLE_HTTP_STATUSES = new Set([500, 502, 503, 504]);

interface ErrorShape {
  code?: unknown;
  errno?: unknown;
  name?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

/** The failure `error` stands for, looking through its causes (fetch, the AWS SDK and AggregateError wrap them). */
export function dependencyFailureOf(error: unknown): DependencyFailure | null {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.size < 16) {
    const current = queue.shift();
    if (typeof current !== 'object' || current === null || seen.has(current)) continue;
    seen.add(current);
    const found = ownFailure(current as ErrorShape);
    if (found) return found;
    const { cause, errors } = current as ErrorShape;
    queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return null;
}

function ownFailure(error: ErrorShape): DependencyFailure | null {
  const code = typeof error.code === 'string' ? error.code : '';
  const name = typeof error.name === 'string' ? error.name : '';
  const message = typeof error.message === 'string' ? error.message : '';
  if (FULL_ERRNO.has(code) || code === FULL_SQLSTATE) return 'storage_full';
  if (UNREACHABLE_ERRNO.has(code) || UNREACHABLE_SQLSTATE.test(code) || UNREACHABLE_SQLITE.test(code))
    return 'unreachable';
  if (PG_CONNECTION_MESSAGES.some((m) => message.startsWith(m))) return 'unreachable';
  if (REDIS_NAMES.has(name) || REDIS_MESSAGES.includes(message)) return 'unreachable';
  const status = error.$metadata?.httpStatusCode;
  if (
    error.$metadata &&
    (AWS_UNAVAILABLE_NAMES.has(name) || (typeof status === 'number' && UNAVAILABLE_HTTP_STATUSES.has(status)))
  )
    return 'unreachable';
  return null;
}
