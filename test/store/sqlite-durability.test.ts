import Database from 'better-sqlite3';
import t from 'tap';
import type { Test } from 'tap';
import { issueApiKey } from '../../src/services/api-keys.js';
import { SqliteDatabase } from '../../src/store/sqlite/sqlite-database.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { storeUpload } from '../helpers/uploads.js';
import { insertTask, newAccountWithTokens } from '../helpers/worker.js';
import { claimNextTask } from '../helpers/store.js';

/**
 * Claims and leases commit without waiting for the disk (SqliteDatabase.writeUnsynced); everything a
 * client is promised commits with synchronous = FULL. These pin the one way that could go wrong
 * silently: the connection left in NORMAL after an unsynced write, so that later 202s would no
 * longer be durable.
 */

const FULL = 2;
const NORMAL = 1;

class InspectableDatabase extends SqliteDatabase {
  /** The synchronous mode in force at each transaction the store ran (write is every transaction's way in). */
  readonly commitModes: number[] = [];
  override write<T>(fn: () => T): T {
    this.commitModes.push(this.synchronousMode());
    return super.write(fn);
  }
  synchronousMode(): number {
    return this.pragmaValue('synchronous');
  }
  pragmaValue(name: string): number {
    return this.connection.pragma(name, { simple: true }) as number;
  }
  exec(sql: string): void {
    this.connection.exec(sql);
  }
}

async function openStore(t: Test) {
  const path = `${t.testdir({})}/store.sqlite`;
  const db = new InspectableDatabase(path);
  const store = new SqliteStore(db);
  await store.migrate();
  t.teardown(() => store.close());
  return { store, db, path };
}

t.test('every claim and lease leaves the connection committing with FULL', async (t) => {
  const { store, db, path } = await openStore(t);
  t.equal(db.synchronousMode(), FULL, 'FULL from the start');
  const accountId = await newAccountWithTokens(store, 1000);
  const task = await insertTask(store, accountId);
  const now = new Date();

  const claim = await store.idempotencyKeys.claimIdempotencyKey({
    accountId,
    key: 'k1',
    fingerprint: 'f',
    leaseToken: 'l',
    now,
    leaseMs: 60_000,
    ttlMs: 86_400_000,
  });
  t.same(claim, { outcome: 'acquired' });
  t.equal(db.synchronousMode(), FULL, 'after an Idempotency-Key claim');
  const claimed = await claimNextTask(store.tasks, { now, leaseMs: 60_000, maxAttempts: 3, deadlineMs: 3_600_000 });
  t.equal(claimed?.id, task.id);
  t.equal(db.synchronousMode(), FULL, 'after a task claim');
  t.ok(await store.tasks.renewLease(task.id, 1, now, 60_000));
  t.equal(db.synchronousMode(), FULL, 'after a lease renewal');
  t.equal(await store.webhooks.claimDueWebhookDelivery(now, 60_000), null);
  t.equal(db.synchronousMode(), FULL, 'after a webhook claim');

  // The unsynced commits are commits: another connection sees them.
  const reader = new Database(path, { readonly: true });
  t.teardown(() => reader.close());
  t.match(reader.prepare('SELECT status, attempt FROM tasks WHERE id = ?').get(task.id), {
    status: 'IN_PROGRESS',
    attempt: 1,
  });
  t.match(reader.prepare('SELECT status FROM idempotency_keys WHERE key = ?').get('k1'), { status: 'in_flight' });
});

t.test('releasing an Idempotency-Key (a refused request) is one unsynced transaction, like its claim', async (t) => {
  // An autocommit would be a sync under FULL: one fsync on the event loop for every refused create.
  const { store, db, path } = await openStore(t);
  const accountId = await newAccountWithTokens(store, 1000);
  const held = { accountId, key: 'refused', leaseToken: 'l' };
  await store.idempotencyKeys.claimIdempotencyKey({
    ...held,
    fingerprint: 'f',
    now: new Date(),
    leaseMs: 60_000,
    ttlMs: 86_400_000,
  });
  db.commitModes.length = 0;
  await store.idempotencyKeys.releaseIdempotencyKey(held);
  t.same(db.commitModes, [NORMAL], 'one transaction, committed without a sync');
  t.equal(db.synchronousMode(), FULL, 'and FULL again after it');
  const reader = new Database(path, { readonly: true });
  t.teardown(() => reader.close());
  t.equal(
    reader.prepare('SELECT 1 FROM idempotency_keys WHERE key = ?').get('refused'),
    undefined,
    'the key is free for a retry',
  );
});

t.test('completing an Idempotency-Key outside a create (an upload) is one synced transaction', async (t) => {
  const { store, db } = await openStore(t);
  const accountId = await newAccountWithTokens(store, 1000);
  const held = { accountId, key: 'upload', leaseToken: 'l' };
  await store.idempotencyKeys.claimIdempotencyKey({
    ...held,
    fingerprint: 'f',
    now: new Date(),
    leaseMs: 60_000,
    ttlMs: 86_400_000,
  });
  db.commitModes.length = 0;
  t.equal(
    await store.idempotencyKeys.completeIdempotencyKey({
      ...held,
      response: { statusCode: 201, headers: {}, body: Buffer.from('{}') },
    }),
    true,
  );
  t.same(db.commitModes, [FULL], 'a replay answers from it: on disk before the response');
});

t.test('deleting a media commits synced; marking its blob deleted is one unsynced transaction', async (t) => {
  const { store, db } = await openStore(t);
  const accountId = await newAccountWithTokens(store, 1000);
  const now = new Date();
  const media = await storeUpload(store, accountId, now);
  db.commitModes.length = 0;
  t.equal(await store.media.deleteMedia(accountId, media.id, now), media.blobKey);
  t.same(db.commitModes, [FULL], 'the 204 of a delete reports it: synced');
  db.commitModes.length = 0;
  await store.media.completeBlobDeletion(media.blobKey, now);
  t.same(db.commitModes, [NORMAL], 'bookkeeping: no sync (a lost one only deletes a missing blob again)');
  t.same(await store.media.listDueBlobDeletions(now, 10), []);
});

t.test("an API key's last use (once a minute per key, on the request path) is one unsynced transaction", async (t) => {
  const { store, db } = await openStore(t);
  const { record } = await issueApiKey(store, await newAccountWithTokens(store, 1000), 'probe', new Date());
  db.commitModes.length = 0;
  await store.accounts.markApiKeyUsed(record.id, new Date());
  t.same(db.commitModes, [NORMAL]);
});

t.test('an unsynced write that throws rolls back and still restores FULL', async (t) => {
  const { db, path } = await openStore(t);
  db.exec('CREATE TABLE scratch (n INTEGER)');
  t.throws(() =>
    db.writeUnsynced(() => {
      db.exec('INSERT INTO scratch VALUES (1)');
      throw new Error('midway');
    }),
  );
  t.equal(db.synchronousMode(), FULL);
  const reader = new Database(path, { readonly: true });
  t.teardown(() => reader.close());
  t.equal((reader.prepare('SELECT count(*) AS n FROM scratch').get() as { n: number }).n, 0, 'rolled back');
});

t.test('savepoint sub-journals stay in memory', async (t) => {
  // A batch of creates writes each create in a savepoint; with temp_store at its default every
  // batch past 64 KiB of sub-journal created, wrote and unlinked a temporary file (docs/performance-history.md).
  const { db } = await openStore(t);
  const MEMORY = 2;
  t.equal(db.pragmaValue('temp_store'), MEMORY);
});
