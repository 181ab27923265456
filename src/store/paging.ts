import type { Page } from './port.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { uuidv7Floor } from '../ids.js';

/** The largest page any list of a store serves (the API's are at most 100). */
export const MAX_PAGE_SIZE = 1000;

/**
 * Conditions and parameters of a newest-first page of one account's rows keyed by UUIDv7 id, with
 * equality filters on the given columns (undefined = no filter) and optional creation-time bounds
 * (exclusive). The caller adds the LIMIT, of pageFetchSize rows. `placeholder` writes a parameter's
 * placeholder from its name (`@name` unless the adapter needs another form).
 */
export function newestFirstKeyset(
  accountId: string,
  cursor: string | undefined,
  equals: Record<string, string | undefined>,
  created: { after?: Date; before?: Date } = {},
  placeholder: (name: string) => string = (name) => `@${name}`,
) {
  const conditions = [`account_id = ${placeholder('accountId')}`, `id < ${placeholder('before')}`];
  // 'g' sorts after every lower-case hex UUID, so without a cursor the page starts at the newest row.
  const params: Record<string, unknown> = { accountId, before: cursor ? decodeCursor(cursor) : 'g' };
  for (const [column, value] of Object.entries(equals)) {
    if (value === undefined) continue;
    conditions.push(`${column} = ${placeholder(column)}`);
    params[column] = value;
  }
  // Time bounds become id bounds: a UUIDv7 id starts with its creation millisecond, so the range
  // stays one seek of the id index.
  if (created.before) {
    conditions.push(`id < ${placeholder('createdBefore')}`);
    params.createdBefore = uuidv7Floor(created.before);
  }
  if (created.after) {
    conditions.push(`id >= ${placeholder('createdAfter')}`);
    params.createdAfter = uuidv7Floor(new Date(created.after.getTime() + 1));
  }
  return { conditions, params };
}

/** Rows fetched for a page: one more than it holds, so that a next page needs no extra query. */
export function pageFetchSize(limit: number): number {
  // Checked because listTasks writes it into its SQL.
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
    throw new RangeError(`page size ${limit} is not an integer from 1 to ${MAX_PAGE_SIZE}`);
  return limit + 1;
}

/** Rows were fetched with limit + 1 so that the presence of a next page needs no extra query. */
export function pageOf<T>(items: T[], limit: number, positionOf: (item: T) => string): Page<T> {
  const hasMore = items.length > limit;
  const pageItems = hasMore ? items.slice(0, limit) : items;
  return { items: pageItems, nextCursor: hasMore ? encodeCursor(positionOf(pageItems[pageItems.length - 1])) : null };
}
