import { TASK_STATUSES } from '../../../schemas/resources.js';

/**
 * The models an account has tasks of, one index seek each (a skip scan of the
 * tasks_account_model_status index): `account` is the SQL of the account id (a parameter).
 */
export const modelsOfAccount = (account: string): string => `
  WITH RECURSIVE listed(model) AS (
    SELECT (SELECT model FROM tasks WHERE account_id = ${account} ORDER BY model LIMIT 1)
    UNION ALL
    SELECT (SELECT model FROM tasks WHERE account_id = ${account} AND model > listed.model ORDER BY model LIMIT 1)
    FROM listed WHERE listed.model IS NOT NULL
  )
  SELECT model FROM listed WHERE model IS NOT NULL`;

/** The statuses of the tasks a key's spend counts: a FAILED or CANCELED task was refunded. */
export const SPENDING_STATUSES = TASK_STATUSES.filter((status) => status !== 'FAILED' && status !== 'CANCELED');

/**
 * The condition that reads an account's tasks of `statuses` as ranges of tasks_account_model_status
 * (account_id, model, status, id, cost, key_id, created_at): one per (model, status) pair, each
 * bounded by whatever condition on `id` comes with it, instead of every entry of the account.
 * The statuses are the contract's, which only the store writes, so they are written into the SQL.
 */
export const accountRanges = (account: string, statuses: readonly string[] = TASK_STATUSES): string =>
  `account_id = ${account} AND model IN (${modelsOfAccount(account)})
   AND status IN (${statuses.map((status) => `'${status}'`).join(', ')})`;
