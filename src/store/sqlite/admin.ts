import type { AdminAuditEntry, AdminKeyRecord, UsageQuery, UsageRow } from '../../core/admin.js';
import { decodeCursor } from '../cursor.js';
import { pageFetchSize, pageOf } from '../paging.js';
import type { AdminStore, Page, UsageStore } from '../port.js';
import { uuidv7Floor } from '../../ids.js';
import { dateOrNull } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { usageSql } from '../usage-sql.js';
import { accountRanges } from './account-ranges.js';

interface AdminKeyRow {
  id: string;
  name: string;
  prefix: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

interface AuditRow {
  id: string;
  admin_key_id: string | null;
  action: string;
  target: string | null;
  status_code: number;
  request_id: string;
  client_address: string;
  created_at: number;
}

const toAdminKey = (r: AdminKeyRow): AdminKeyRecord => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  createdAt: new Date(r.created_at),
  lastUsedAt: dateOrNull(r.last_used_at),
  revokedAt: dateOrNull(r.revoked_at),
});

const toAudit = (r: AuditRow): AdminAuditEntry => ({
  id: r.id,
  adminKeyId: r.admin_key_id,
  action: r.action,
  target: r.target,
  statusCode: r.status_code,
  requestId: r.request_id,
  clientAddress: r.client_address,
  createdAt: new Date(r.created_at),
});

/** Admin keys and the audit log on the embedded store. */
export class SqliteAdmin implements AdminStore {
  constructor(private readonly db: SqliteDatabase) {}

  async insertAdminKey(input: {
    id: string;
    name: string;
    prefix: string;
    hash: string;
    now: Date;
  }): Promise<AdminKeyRecord> {
    const row = this.db
      .statement('INSERT INTO admin_keys (id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?) RETURNING *')
      .get(input.id, input.name, input.prefix, input.hash, input.now.getTime()) as AdminKeyRow;
    return toAdminKey(row);
  }

  async findActiveAdminKey(hash: string): Promise<AdminKeyRecord | null> {
    const row = this.db.statement('SELECT * FROM admin_keys WHERE hash = ? AND revoked_at IS NULL').get(hash) as
      | AdminKeyRow
      | undefined;
    return row ? toAdminKey(row) : null;
  }

  async listAdminKeys(): Promise<AdminKeyRecord[]> {
    return (this.db.statement('SELECT * FROM admin_keys ORDER BY id').all() as AdminKeyRow[]).map(toAdminKey);
  }

  async revokeAdminKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = this.db
      .statement('UPDATE admin_keys SET revoked_at = ? WHERE (id = ? OR prefix = ?) AND revoked_at IS NULL')
      .run(now.getTime(), idOrPrefix, idOrPrefix);
    return result.changes > 0;
  }

  async markAdminKeyUsed(keyId: string, now: Date): Promise<void> {
    this.db.statement('UPDATE admin_keys SET last_used_at = ? WHERE id = ?').run(now.getTime(), keyId);
  }

  async appendAudit(entry: AdminAuditEntry): Promise<void> {
    this.db
      .statement(
        `INSERT INTO admin_audit_log (id, admin_key_id, action, target, status_code, request_id, client_address, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        entry.id,
        entry.adminKeyId,
        entry.action,
        entry.target,
        entry.statusCode,
        entry.requestId,
        entry.clientAddress,
        entry.createdAt.getTime(),
      );
  }

  async listAudit(query: { limit: number; cursor?: string }): Promise<Page<AdminAuditEntry>> {
    const rows = this.db
      .statement('SELECT * FROM admin_audit_log WHERE id < ? ORDER BY id DESC LIMIT ?')
      .all(query.cursor ? decodeCursor(query.cursor) : 'g', pageFetchSize(query.limit)) as AuditRow[];
    return pageOf(rows.map(toAudit), query.limit, (e) => e.id);
  }
}

/** Usage reports on the embedded store: one grouped read of the tasks. */
export class SqliteUsage implements UsageStore {
  constructor(private readonly db: SqliteDatabase) {}

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    const sql = usageSql(query, {
      day: "strftime('%Y-%m-%d', created_at / 1000, 'unixepoch')",
      // Named: the account's id is read more than once in its ranges.
      placeholder: (index) => `@p${index}`,
      integer: (sum) => sum,
      // One range of tasks_account_model_status per (model, status) pair of the account (decision 0038).
      account: (placeholder) => accountRanges(placeholder),
    });
    const params: Record<string, string> = { p1: uuidv7Floor(query.from), p2: uuidv7Floor(query.to) };
    if (query.accountId !== undefined) params.p3 = query.accountId;
    return this.db.statement(sql).all(params) as UsageRow[];
  }
}
