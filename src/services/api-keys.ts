import { hash, randomBytes } from 'node:crypto';
import type { Account, ApiKeyRecord, Store } from '../store/port.js';
import { newIdAt } from '../ids.js';
import type { AccountStatus, KeyScope } from '../core/key-scope.js';

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
  scope?: KeyScope,
): Promise<IssuedKey> {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const record = await store.accounts.insertApiKey({
    id: newIdAt(now),
    accountId,
    name,
    prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
    hash: hashApiKey(key),
    now,
    ...(scope && { scope }),
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

/** Who a request's key speaks for: what authentication tells every route. */
export interface Caller {
  accountId: string;
  keyId: string;
  keyName: string;
  keyPrefix: string;
  /** The key's scope (fixed for its life) and its account's status when the store was last asked. */
  scope: KeyScope;
  accountStatus: AccountStatus;
}

/** The key a create is made with, as admission takes it. */
export const creatingKeyOf = (caller: Caller) => ({ id: caller.keyId, scope: caller.scope });

/**
 * A key the store found active is trusted this long without asking again, so a revocation (made
 * by the CLI, in another process) is refused within this time. Looking the key up on every request
 * cost about a seventh of a read (docs/performance-history.md, "Optimisations").
 */
export const API_KEY_CACHE_TTL_MS = 1000;
/** Keys kept at most; past it the oldest entries go first. */
const API_KEY_CACHE_MAX_ENTRIES = 10_000;
/** last_used_at is informational; writing it on every request would cost a write per read. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * What the Bearer authentication asks of the accounts: the caller of an active key, and noting its
 * use. Active keys are kept by hash for API_KEY_CACHE_TTL_MS after the store last confirmed them.
 * Only keys found active are kept: an unknown key is asked for every time, so a key issued a moment
 * ago works at once, and failures stay with the failure limiter. Entries hold the caller only (no
 * balance, nothing that changes while the key lives). Methods answer synchronously where they can
 * (a cached key, a use noted recently), so that the common request costs no promise.
 */
export class ApiKeyAuthentication {
  private readonly entries = new Map<string, { caller: Caller; expiresAt: number }>();
  private readonly lastMarked = new Map<string, number>();

  constructor(private readonly store: Pick<Store, 'accounts'>) {}

  /** The caller of a key the store confirmed less than API_KEY_CACHE_TTL_MS ago, or null. */
  cachedCaller(hash: string, nowMs: number): Caller | null {
    const cached = this.entries.get(hash);
    if (!cached) return null;
    if (cached.expiresAt > nowMs) return cached.caller;
    this.entries.delete(hash);
    return null;
  }

  /** Asks the store, and keeps the key if it is active. */
  async loadCaller(hash: string, nowMs: number): Promise<Caller | null> {
    const found = await this.store.accounts.findActiveApiKey(hash);
    if (!found) return null;
    const caller: Caller = {
      accountId: found.account.id,
      keyId: found.key.id,
      keyName: found.key.name,
      keyPrefix: found.key.prefix,
      scope: found.key.scope,
      accountStatus: found.account.status,
    };
    // Map order is insertion order and a refreshed entry is re-inserted, so the first is the oldest.
    if (this.entries.size >= API_KEY_CACHE_MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(hash, { caller, expiresAt: nowMs + API_KEY_CACHE_TTL_MS });
    return caller;
  }

  /**
   * Forgets the cached keys of an account, or one key of it, so that a revocation or a suspension
   * made through this process is refused at once here (other processes within API_KEY_CACHE_TTL_MS).
   */
  forget(match: { accountId?: string; keyId?: string }): void {
    for (const [hash, { caller }] of this.entries)
      if (caller.accountId === match.accountId || caller.keyId === match.keyId) this.entries.delete(hash);
  }

  /** Writes the key's last_used_at unless this process wrote it less than a minute ago (then undefined). */
  markUsed(keyId: string, now: Date): Promise<void> | undefined {
    if (now.getTime() - (this.lastMarked.get(keyId) ?? 0) < LAST_USED_RESOLUTION_MS) return;
    this.lastMarked.set(keyId, now.getTime());
    return this.store.accounts.markApiKeyUsed(keyId, now);
  }
}
