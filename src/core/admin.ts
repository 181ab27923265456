import { DomainError } from './errors.js';

/**
 * The business as its operators see it (docs/design.md §3.9): admin keys, the audit log of their
 * requests, and usage reports counted from the tasks.
 */

export interface AdminKeyRecord {
  id: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** One admin request, refused ones included: who (null when no admin key was recognised), what, on what. */
export interface AdminAuditEntry {
  id: string;
  adminKeyId: string | null;
  /** The route: method and path pattern, e.g. `POST /admin/v1/accounts/:account_id/grants`. */
  action: string;
  /** The resource acted on (an account or key id), else null. */
  target: string | null;
  statusCode: number;
  requestId: string;
  clientAddress: string;
  createdAt: Date;
}

export const USAGE_GROUPS = ['day', 'model', 'account', 'key'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export interface UsageQuery {
  /** Tasks created at or after this instant (the first day's 00:00 UTC)... */
  from: Date;
  /** ...and before this one (the day after the last day, 00:00 UTC). */
  to: Date;
  groupBy: readonly UsageGroup[];
  accountId?: string;
}

export interface UsageRow {
  day?: string;
  model?: string;
  account_id?: string;
  key_id?: string | null;
  tasks: number;
  images: number;
  tokens_charged: number;
  tokens_refunded: number;
  failed: number;
  canceled: number;
}

/** The longest range a report covers, so that one request cannot ask the store to read years. */
export const USAGE_MAX_DAYS = 366;

/** A report's dates (`YYYY-MM-DD`, inclusive, UTC) as the instants the store bounds the tasks by. */
export function usageRange(from: string, to: string): { from: Date; to: Date } {
  const start = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`) + 86_400_000;
  const badDate = (pointer: string, detail: string) =>
    new DomainError('invalid_request', detail, [{ pointer, location: 'query', code: 'invalid_range', detail }]);
  if (Number.isNaN(start)) throw badDate('/from', 'from is not a date.');
  if (Number.isNaN(end)) throw badDate('/to', 'to is not a date.');
  if (end <= start) throw badDate('/to', 'to is before from.');
  if (end - start > USAGE_MAX_DAYS * 86_400_000)
    throw badDate('/to', `A report covers at most ${USAGE_MAX_DAYS} days.`);
  return { from: new Date(start), to: new Date(end) };
}

/** `group_by` as sent (a comma list), each group once, in the order sent. */
export function usageGroups(groupBy: string | undefined, allowed: readonly UsageGroup[]): UsageGroup[] {
  if (groupBy === undefined || groupBy === '') return [];
  const groups: UsageGroup[] = [];
  for (const part of groupBy.split(',')) {
    const group = part.trim() as UsageGroup;
    if (!allowed.includes(group)) {
      const detail = `group_by takes ${allowed.join(', ')}; not ${JSON.stringify(part)}.`;
      throw new DomainError('invalid_request', detail, [
        { pointer: '/group_by', location: 'query', code: 'invalid_value', detail },
      ]);
    }
    if (!groups.includes(group)) groups.push(group);
  }
  return groups;
}

/** A UTC calendar day, `YYYY-MM-DD`. */
export const utcDay = (at: Date) => at.toISOString().slice(0, 10);

export const USAGE_COLUMNS = [
  'day',
  'model',
  'account_id',
  'key_id',
  'tasks',
  'images',
  'tokens_charged',
  'tokens_refunded',
  'failed',
  'canceled',
] as const;

/**
 * A cell as a spreadsheet will not run it: one that starts with `=`, `+`, `-`, `@` (or a tab or
 * carriage return) is prefixed with a quote (OWASP's CSV injection advice), then quoted as RFC 4180 says.
 */
export function csvCell(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return String(value);
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The report as CSV: a header of the columns present, then a line per row (CRLF, RFC 4180). */
export function usageCsv(rows: readonly UsageRow[], groups: readonly UsageGroup[]): string {
  const grouped: Record<UsageGroup, (typeof USAGE_COLUMNS)[number]> = {
    day: 'day',
    model: 'model',
    account: 'account_id',
    key: 'key_id',
  };
  const present = new Set(groups.map((group) => grouped[group]));
  const columns = USAGE_COLUMNS.filter((column, index) => index >= 4 || present.has(column));
  const lines = [columns.join(',')];
  for (const row of rows) lines.push(columns.map((column) => csvCell(row[column])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
