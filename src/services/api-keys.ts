import { hash, randomBytes } from 'node:crypto';
import type { Account, ApiKeyRecord, Store } from '../store/port.js';
import { newIdAt } from '../ids.js';

/** Keys are `igk_` + 32 random bytes (256 bits) in base64url; only their SHA-256 is stored. */
const KEY_PREFIX = 'igk_';
const KEY_PATTERN = /^igk_[A-Za-z0-9_-]{43}$/;
/** Shown in listings so a person can tell keys apart; 8 random characters are 48 bits, not enough to guess the rest. */
const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 8;

export function isWellFormedApiKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

/**
 * A plain SHA-256 suffices (no slow KDF): the key is 256 random bits, so there is nothing to
 * brute-force, and a fast hash keeps authentication off the hot path's cost.
 */
export function hashApiKey(key: string): string {
  // The one-shot hash, without a Hash object: it runs on every authenticated request.
  return hash('sha256', key, 'hex');
}

export interface IssuedKey {
  key: string;
  record: ApiKeyRecord;
}

export async function issueApiKey(
  store: Pick<Store, 'accounts'>,
  accountId: string,
  name: string,
  now: Date,
): Promise<IssuedKey> {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const record = await store.accounts.insertApiKey({
    id: newIdAt(now),
    accountId,
    name,
    prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
    hash: hashApiKey(key),
    now,
  });
  return { key, record };
}

export async function createAccountWithKey(
  store: Pick<Store, 'accounts'>,
  input: { name: string; tokens: number; now: Date },
): Promise<{ account: Account } & IssuedKey> {
  const account = await store.accounts.createAccount({
    id: newIdAt(input.now),
    name: input.name,
    initialTokens: input.tokens,
    now: input.now,
  });
  const issued = await issueApiKey(store, account.id, input.name, input.now);
  return { account, ...issued };
}
