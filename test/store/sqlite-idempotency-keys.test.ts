import t from 'tap';
import { newIdAt } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { openAtSchemaVersion } from '../helpers/sqlite-schema.js';

/**
 * Migration 5 moves the idempotency keys into a rowid table with a unique (account_id, key) index
 * (docs/performance-history.md, "Optimisations"). Keys recorded before it must keep working: an answered key
 * still replays its response, a held key is still held, and the uniqueness still decides claims.
 */
t.test('keys recorded before migration 5 replay, stay held and stay unique after it', async (t) => {
  const path = `${t.testdir({})}/store.sqlite`;
  const before = openAtSchemaVersion(path, 4);
  const now = Date.now();
  const accountId = newIdAt(new Date(now));
  before
    .prepare('INSERT INTO accounts (id, name, balance, created_at) VALUES (?, ?, ?, ?)')
    .run(accountId, 'old', 0, now);
  const insertKey = before.prepare(
    `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, lease_token, lease_expires_at,
       response_status, response_headers, response_body, created_at, expires_at)
     VALUES (@account_id, @key, @fingerprint, @status, @lease_token, @lease_expires_at,
       @response_status, @response_headers, @response_body, @created_at, @expires_at)`,
  );
  const day = 24 * 60 * 60 * 1000;
  insertKey.run({
    account_id: accountId,
    key: 'answered',
    fingerprint: 'fp-a',
    status: 'completed',
    lease_token: null,
    lease_expires_at: null,
    response_status: 202,
    response_headers: '{"location":"/api/v1/images/generations/x"}',
    response_body: Buffer.from('{"data":"first"}'),
    created_at: now,
    expires_at: now + day,
  });
  insertKey.run({
    account_id: accountId,
    key: 'held',
    fingerprint: 'fp-h',
    status: 'in_flight',
    lease_token: 'holder',
    lease_expires_at: now + 60_000,
    response_status: null,
    response_headers: null,
    response_body: null,
    created_at: now,
    expires_at: now + day,
  });
  before.close();

  const store = new SqliteStore(path);
  await store.migrate();
  t.teardown(() => store.close());
  const claim = (key: string, fingerprint: string, leaseToken: string) =>
    store.idempotencyKeys.claimIdempotencyKey({
      accountId,
      key,
      fingerprint,
      leaseToken,
      now: new Date(now + 1000),
      leaseMs: 60_000,
      ttlMs: day,
    });

  const replay = await claim('answered', 'fp-a', 'retry');
  t.equal(replay.outcome, 'replay');
  if (replay.outcome === 'replay') {
    t.equal(replay.response.statusCode, 202);
    t.same(replay.response.headers, { location: '/api/v1/images/generations/x' });
    t.equal(replay.response.body.toString(), '{"data":"first"}', 'the stored response, byte for byte');
  }
  t.same(await claim('answered', 'fp-other', 'retry'), { outcome: 'fingerprint_mismatch' }, 'still bound to its body');
  t.same(await claim('held', 'fp-h', 'second'), { outcome: 'in_progress' }, 'the holder keeps its lease');
  t.equal(
    await store.idempotencyKeys.completeIdempotencyKey({
      accountId,
      key: 'held',
      leaseToken: 'holder',
      response: { statusCode: 201, headers: {}, body: Buffer.from('done') },
    }),
    true,
    'and can complete it',
  );
  const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => claim('new', 'fp-n', `t${i}`)));
  t.equal(claims.filter((c) => c.outcome === 'acquired').length, 1, 'a new key is taken once');
  t.equal(
    await store.idempotencyKeys.deleteExpiredIdempotencyKeys(new Date(now + day), 100),
    2,
    'the sweeper finds the old keys by expiry',
  );
  t.equal(
    await store.idempotencyKeys.deleteExpiredIdempotencyKeys(new Date(now + 1000 + day), 100),
    1,
    'and the new one a second later',
  );
});
