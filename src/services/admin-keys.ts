import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AdminKeyRecord } from '../core/admin.js';
import { newIdAt } from '../ids.js';
import type { Store } from '../store/port.js';
import { hashApiKey } from './api-keys.js';

/**
 * Admin keys (docs/design.md §3.9): a kind of their own, `iga_` + 256 random bits, never an
 * account's key (whose `igk_` form the admin API refuses unread, as the account faces refuse this
 * one). Stored only as a SHA-256, like account keys; ADMIN_API_KEY (for containers) is kept in
 * this process as its hash only and compared in constant time.
 */
const ADMIN_KEY_PREFIX = 'iga_';
const ADMIN_KEY_PATTERN = /^iga_[A-Za-z0-9_-]{43}$/;
const DISPLAY_PREFIX_LENGTH = ADMIN_KEY_PREFIX.length + 8;
/** The audit log's admin key id of ADMIN_API_KEY, which has no row. */
export const ENVIRONMENT_ADMIN_KEY_ID = 'ADMIN_API_KEY';

export async function issueAdminKey(
  store: Pick<Store, 'admin'>,
  name: string,
  now: Date,
): Promise<{ key: string; record: AdminKeyRecord }> {
  const key = ADMIN_KEY_PREFIX + randomBytes(32).toString('base64url');
  const record = await store.admin.insertAdminKey({
    id: newIdAt(now),
    name,
    prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
    hash: hashApiKey(key),
    now,
  });
  return { key, record };
}

/** Who an admin request's key is: the admin key id the audit log names. */
export interface AdminCaller {
  adminKeyId: string;
}

export class AdminKeyAuthentication {
  private readonly environmentKeyHash: Buffer | null;

  constructor(
    private readonly store: Pick<Store, 'admin'>,
    environmentKey: string | undefined,
  ) {
    this.environmentKeyHash = environmentKey ? Buffer.from(hashApiKey(environmentKey), 'hex') : null;
  }

  /** The admin caller of `key`, or null (unknown, revoked, or not an admin key at all). */
  async authenticate(key: string, now: Date): Promise<AdminCaller | null> {
    const hash = hashApiKey(key);
    if (this.environmentKeyHash && timingSafeEqual(Buffer.from(hash, 'hex'), this.environmentKeyHash))
      return { adminKeyId: ENVIRONMENT_ADMIN_KEY_ID };
    if (!ADMIN_KEY_PATTERN.test(key)) return null;
    // Looked up by its hash: the index compares hashes of 256 random bits, so its timing tells an
    // attacker nothing about any key.
    const found = await this.store.admin.findActiveAdminKey(hash);
    if (!found) return null;
    if (!found.lastUsedAt || now.getTime() - found.lastUsedAt.getTime() > 60_000)
      await this.store.admin.markAdminKeyUsed(found.id, now);
    return { adminKeyId: found.id };
  }
}
