import t, { type Test } from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import {
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_LEASE_RENEW_MS,
  IdempotencyService,
} from '../../src/services/idempotency.js';
import type { IdempotencyStore } from '../../src/store/port.js';
import { testStoreAdapter } from '../helpers/store.js';

async function setUp(t: Test) {
  const { store } = await testStoreAdapter().open(t);
  const { account } = await createAccountWithKey(store, { name: 'lease', tokens: 10, now: new Date() });
  let nowMs = Date.parse('2026-11-24T12:00:00Z');
  const service = new IdempotencyService({ store: store.idempotencyKeys, now: () => new Date(nowMs) });
  return { service, accountId: account.id, advance: (ms: number) => (nowMs += ms) };
}

t.test('a key held by a process that died is free again within seconds, not a minute', async (t) => {
  const { service, accountId, advance } = await setUp(t);
  t.ok(IDEMPOTENCY_LEASE_MS <= 10_000, 'the lease is a matter of seconds');
  t.ok(IDEMPOTENCY_LEASE_RENEW_MS * 2 < IDEMPOTENCY_LEASE_MS, 'a renewal can be missed once without losing the key');
  const crashed = await service.claim(accountId, 'k', 'fp');
  t.equal(crashed.outcome, 'acquired');
  // The holder never renews again (its process was killed).
  advance(IDEMPOTENCY_LEASE_MS - 1);
  await t.rejects(service.claim(accountId, 'k', 'fp'), { code: 'idempotency_in_progress' });
  advance(2);
  const retry = await service.claim(accountId, 'k', 'fp');
  t.equal(retry.outcome, 'acquired', 'the retry takes the key over');
  if (crashed.outcome === 'acquired')
    t.equal(await service.renew(crashed.held), false, 'the dead holder could not renew it back');
});

t.test('a holder that renews keeps its key past the first lease', async (t) => {
  const { service, accountId, advance } = await setUp(t);
  const held = await service.claim(accountId, 'k', 'fp');
  if (held.outcome !== 'acquired') throw new Error('not acquired');
  for (let i = 0; i < 5; i++) {
    advance(IDEMPOTENCY_LEASE_RENEW_MS);
    t.equal(await service.renew(held.held), true);
  }
  advance(IDEMPOTENCY_LEASE_MS - 1);
  await t.rejects(
    service.claim(accountId, 'k', 'fp'),
    { code: 'idempotency_in_progress' },
    'still held five renewals on',
  );
  await service.release(held.held);
  t.equal(await service.renew(held.held), false, 'a released key is not renewed');
  t.equal((await service.claim(accountId, 'k', 'fp')).outcome, 'acquired');
});

t.test('a held key is renewed while its request works, until the lease is stopped', async (t) => {
  const renewed: string[] = [];
  let firstRenewal!: () => void;
  const renewedOnce = new Promise<void>((resolve) => (firstRenewal = resolve));
  const store = {
    renewIdempotencyKey: async (held: { key: string }) => {
      renewed.push(held.key);
      firstRenewal();
      return true;
    },
  } as unknown as IdempotencyStore;
  const service = new IdempotencyService({ store, now: () => new Date() });
  const lease = service.keepAlive({ accountId: 'a', key: 'k', leaseToken: 'token' }, () => {});
  // The renewal timer is unref'd (it must not keep a process alive); this keeps the test's alive meanwhile.
  const keepAlive = setTimeout(() => {}, 60_000);
  await renewedOnce;
  clearTimeout(keepAlive);
  lease.stop();
  t.same(renewed, ['k'], 'renewed within a renewal period, before the lease could run out');
});
