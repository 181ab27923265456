import { DomainError } from './errors.js';

/**
 * What an API key may do beyond its account's balance (docs/design.md §3.9): the models it may
 * create tasks of, a token budget per UTC calendar period, its own rate limits and an expiry. Set
 * when the key is made and never changed (a key is revoked and another made instead), so a
 * process may keep it with the key's authentication.
 */
export type BudgetPeriod = 'day' | 'month';

export interface TokenBudget {
  tokens: number;
  /** null: the budget is for the key's whole life. */
  period: BudgetPeriod | null;
}

export interface KeyScope {
  /** null: every model. */
  models: readonly string[] | null;
  tokenBudget: TokenBudget | null;
  rateLimits: { createsPerMin: number | null; requestsPerMin: number | null };
  expiresAt: Date | null;
}

export const UNSCOPED: KeyScope = {
  models: null,
  tokenBudget: null,
  rateLimits: { createsPerMin: null, requestsPerMin: null },
  expiresAt: null,
};

export type AccountStatus = 'active' | 'suspended';
export const ACCOUNT_STATUSES = ['active', 'suspended'] as const;

/** The start of the budget period that contains `at` (UTC); the epoch for a lifetime budget. */
export function budgetPeriodStart(period: BudgetPeriod | null, at: Date): Date {
  if (period === 'day') return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
  if (period === 'month') return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
  return new Date(0);
}

/**
 * The period whose spend a create with `key` at `at` is checked against and adds to (the store's
 * key_spend row): null for a key without a budget, whose spend no create reads.
 */
export function budgetPeriodOf(
  key: { id: string; scope: Pick<KeyScope, 'tokenBudget'> } | undefined,
  at: Date,
): { keyId: string; start: Date } | null {
  const budget = key?.scope.tokenBudget;
  return key && budget ? { keyId: key.id, start: budgetPeriodStart(budget.period, at) } : null;
}

export function isExpired(scope: Pick<KeyScope, 'expiresAt'>, at: Date): boolean {
  return scope.expiresAt !== null && scope.expiresAt.getTime() <= at.getTime();
}

export const accountSuspended = () =>
  new DomainError('account_suspended', 'This account is suspended; its keys can make no requests.');

export const keyExpired = () => new DomainError('unauthorized', 'The API key has expired.');

/**
 * What authentication refuses of a key the store found unrevoked: a suspended account (403 on
 * every face) or an expired key (401, like an unknown one).
 */
export function assertKeyUsable(scope: Pick<KeyScope, 'expiresAt'>, accountStatus: AccountStatus, at: Date): void {
  if (isExpired(scope, at)) throw keyExpired();
  if (accountStatus === 'suspended') throw accountSuspended();
}

/** Refuses a task of a model outside the key's `models`. */
export function assertModelAllowed(scope: Pick<KeyScope, 'models'>, model: string): void {
  if (scope.models === null || scope.models.includes(model)) return;
  const detail = `This API key may create tasks of ${scope.models.join(', ')} only.`;
  throw new DomainError('model_not_allowed', detail, [
    { pointer: '/model', location: 'body', code: 'model_not_allowed', detail },
  ]);
}

/**
 * Refuses a charge of `cost` that would take the key's spend in its period (`spent`, what its
 * tasks of the period cost, refunded ones not counted) past its budget.
 */
export function assertWithinBudget(scope: Pick<KeyScope, 'tokenBudget'>, spent: number, cost: number): void {
  const budget = scope.tokenBudget;
  if (budget === null || spent + cost <= budget.tokens) return;
  const per = budget.period === null ? '' : ` per ${budget.period}`;
  throw new DomainError(
    'key_budget_exhausted',
    `This API key may spend ${budget.tokens} tokens${per}; ${spent} are spent and this costs ${cost}.`,
  );
}
