// Not in the PostgreSQL pass: connects to PostgreSQL, SQLite, S3 and Redis itself, whatever TEST_STORE says.
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import pg from 'pg';
import t from 'tap';
import { DomainError } from '../../src/core/errors.js';
import { dependencyFailureOf } from '../../src/services/dependency-failure.js';
import { startCuttingProxy } from '../helpers/cutting-proxy.js';
import { postgresTestUrl, reachable } from '../helpers/postgres.js';

/**
 * The errors are the libraries' own, made for real against loopback servers, files and devices
 * wherever the test can make them; the few it cannot (a server out of connections) are built with
 * the fields the library documents.
 */

/** A loopback port with nothing listening: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

const skipPostgres = (await reachable()) ? false : `no PostgreSQL at ${postgresTestUrl()}`;

t.test(
  'pg: refused, reset mid-session, terminated by the server, out of connections',
  { skip: skipPostgres },
  async (t) => {
    const port = await closedPort();
    const refused = await caught(async () => {
      const client = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/test` });
      await client.connect();
    });
    t.equal(dependencyFailureOf(refused), 'unreachable', 'connection refused');

    const url = new URL(postgresTestUrl());
    const proxy = await startCuttingProxy(t, { host: url.hostname, port: Number(url.port || 5432) });
    url.host = proxy.address;
    const client = new pg.Client({ connectionString: url.toString() });
    client.on('error', () => {});
    await client.connect();
    const reset = await caught(async () => {
      const query = client.query('SELECT pg_sleep(5)');
      setTimeout(() => proxy.resetAll(), 100);
      await query;
    });
    t.equal(dependencyFailureOf(reset), 'unreachable', `reset: ${(reset as Error).message}`);
    const afterwards = await caught(() => client.query('SELECT 1'));
    t.equal(
      dependencyFailureOf(afterwards),
      'unreachable',
      `a statement on the lost client: ${(afterwards as Error).message}`,
    );

    const own = new pg.Client({ connectionString: postgresTestUrl() });
    own.on('error', () => {});
    await own.connect();
    const terminated = await caught(() => own.query('SELECT pg_terminate_backend(pg_backend_pid())'));
    t.equal((terminated as { code?: string }).code, '57P01');
    t.equal(dependencyFailureOf(terminated), 'unreachable', 'terminated by an administrator (a failover)');
    await own.end().catch(() => {});

    for (const code of ['53300', '57P03', '08006'])
      t.equal(dependencyFailureOf(Object.assign(new pg.DatabaseError('x', 1, 'error'), { code })), 'unreachable', code);
    t.equal(
      dependencyFailureOf(Object.assign(new pg.DatabaseError('could not extend file', 1, 'error'), { code: '53100' })),
      'storage_full',
    );

    const checker = new pg.Client({ connectionString: postgresTestUrl() });
    await checker.connect();
    t.teardown(() => checker.end());
    const badStatement = await caught(() => checker.query("SELECT 1 FROM (VALUES (1)) v(x) WHERE x = 'not a number'"));
    t.equal(dependencyFailureOf(badStatement), null, 'a bad statement is ours, not the server being away');
  },
);

t.test(
  'better-sqlite3: busy past its timeout and a full database are the dependency; a constraint is not',
  async (t) => {
    const dir = t.testdir({});
    const path = `${dir}/db.sqlite`;
    const holder = new Database(path);
    t.teardown(() => holder.close());
    holder.exec('CREATE TABLE x (id INTEGER PRIMARY KEY, v BLOB)');
    holder.exec('BEGIN IMMEDIATE');
    const other = new Database(path, { timeout: 0 });
    t.teardown(() => other.close());
    const busy = await caught(() => other.exec('BEGIN IMMEDIATE'));
    t.equal((busy as { code?: string }).code, 'SQLITE_BUSY');
    t.equal(dependencyFailureOf(busy), 'unreachable');
    holder.exec('COMMIT');

    const small = new Database(`${dir}/small.sqlite`);
    t.teardown(() => small.close());
    small.exec('CREATE TABLE x (v BLOB)');
    small.pragma('max_page_count = 8');
    const full = await caught(() => {
      for (let i = 0; i < 100; i++) small.prepare('INSERT INTO x VALUES (?)').run(Buffer.alloc(4096));
    });
    t.equal((full as { code?: string }).code, 'SQLITE_FULL');
    t.equal(dependencyFailureOf(full), 'storage_full');

    holder.exec('INSERT INTO x (id) VALUES (1)');
    const constraint = await caught(() => holder.exec('INSERT INTO x (id) VALUES (1)'));
    t.equal(dependencyFailureOf(constraint), null);
  },
);

t.test('node fs: no space left is a full disk; a missing file is not a dependency failure', async (t) => {
  const noSpace = await caught(() => writeFileSync('/dev/full', 'x'));
  t.equal((noSpace as NodeJS.ErrnoException).code, 'ENOSPC');
  t.equal(dependencyFailureOf(noSpace), 'storage_full');
  const missing = await caught(() => writeFileSync(`${t.testdir({})}/no/such/dir/file`, 'x'));
  t.equal(dependencyFailureOf(missing), null);
});

t.test('AWS SDK: a server away or answering 503 SlowDown is the dependency; NoSuchKey is not', async (t) => {
  const client = (endpoint: string) =>
    new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: 'k', secretAccessKey: 's' },
    });
  const awayPort = await closedPort();
  const away = await caught(() =>
    client(`http://127.0.0.1:${awayPort}`).send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })),
  );
  t.equal(dependencyFailureOf(away), 'unreachable', `away: ${(away as Error).name}`);

  const answers: Record<string, [number, string]> = {
    '/b/busy': [503, 'SlowDown'],
    '/b/missing': [404, 'NoSuchKey'],
  };
  const server = createServer((request, response) => {
    const [status, code] = answers[request.url?.split('?')[0] ?? ''] ?? [500, 'InternalError'];
    response.writeHead(status, { 'content-type': 'application/xml' });
    response.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>m</Message></Error>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const s3 = client(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  const busy = await caught(() => s3.send(new GetObjectCommand({ Bucket: 'b', Key: 'busy' })));
  t.equal(dependencyFailureOf(busy), 'unreachable', `503: ${(busy as Error).name}`);
  const missing = await caught(() => s3.send(new GetObjectCommand({ Bucket: 'b', Key: 'missing' })));
  t.equal((missing as Error).name, 'NoSuchKey');
  t.equal(dependencyFailureOf(missing), null);
});

t.test('fetch and ioredis: a refused connection, wrapped as they wrap it', async (t) => {
  const port = await closedPort();
  const refused = await caught(() => fetch(`http://127.0.0.1:${port}/`));
  t.equal((refused as Error).message, 'fetch failed');
  t.equal(dependencyFailureOf(refused), 'unreachable', 'found in the cause');

  const redis = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  redis.on('error', () => {});
  t.teardown(() => redis.disconnect());
  const down = await caught(async () => {
    await redis.connect().catch(() => {});
    await redis.get('k');
  });
  t.equal(dependencyFailureOf(down), 'unreachable', `redis: ${(down as Error).message}`);
});

t.test('our own errors and plain bugs are not dependency failures', async (t) => {
  t.equal(dependencyFailureOf(new DomainError('invalid_request', 'bad')), null);
  t.equal(dependencyFailureOf(new TypeError('x is undefined')), null);
  t.equal(dependencyFailureOf(undefined), null);
  t.equal(dependencyFailureOf('ECONNREFUSED'), null, 'a string is not an error');
  const loop: { cause?: unknown } = {};
  loop.cause = loop;
  t.equal(dependencyFailureOf(loop), null, 'a cause cycle ends');
});
