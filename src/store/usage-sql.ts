import type { UsageGroup, UsageQuery } from '../core/admin.js';

/**
 * The usage report's one grouped read of the tasks, for both stores (each names its own day and
 * image-count expressions and placeholders): tasks created in [from, to) as a range of their
 * UUIDv7 ids, of one account when asked (then read from a covering index alone: each store's
 * `account` condition names its ranges; decision 0038). A FAILED or
 * CANCELED task was refunded in the transaction that moved it, so its cost is what was refunded.
 * A COMPLETED task holds one image (every backend makes one per task; OpenAI's `n` is n tasks),
 * so images are counted from the index, without reading each task's `generated`.
 * Parameters, in order: the ids' lower and upper bounds, then the account id when asked.
 */
export function usageSql(
  query: UsageQuery,
  dialect: {
    day: string;
    placeholder: (index: number) => string;
    integer: (sum: string) => string;
    /** The condition that selects the account's tasks, given its id's placeholder. */
    account: (placeholder: string) => string;
  },
): string {
  const columns: Record<UsageGroup, string> = {
    day: `${dialect.day} AS day`,
    model: 'model',
    account: 'account_id',
    key: 'key_id',
  };
  const grouped = query.groupBy.map((group) => columns[group]);
  const keys = query.groupBy.map((group) => (group === 'day' ? 'day' : columns[group]));
  const conditions = [`id >= ${dialect.placeholder(1)}`, `id < ${dialect.placeholder(2)}`];
  if (query.accountId !== undefined) conditions.push(dialect.account(dialect.placeholder(3)));
  return `SELECT ${[...grouped, ''].join(', ')}
      ${dialect.integer('count(*)')} AS tasks,
      ${dialect.integer("count(*) FILTER (WHERE status = 'COMPLETED')")} AS images,
      ${dialect.integer('coalesce(sum(cost), 0)')} AS tokens_charged,
      ${dialect.integer("coalesce(sum(CASE WHEN status IN ('FAILED', 'CANCELED') THEN cost ELSE 0 END), 0)")} AS tokens_refunded,
      ${dialect.integer("count(*) FILTER (WHERE status = 'FAILED')")} AS failed,
      ${dialect.integer("count(*) FILTER (WHERE status = 'CANCELED')")} AS canceled
    FROM tasks WHERE ${conditions.join(' AND ')}
    ${keys.length > 0 ? `GROUP BY ${keys.join(', ')} ORDER BY ${keys.join(', ')}` : ''}`;
}
