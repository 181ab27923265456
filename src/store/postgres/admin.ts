import type { AdminAuditEntry, AdminKeyRecord, UsageQuery, UsageRow } from '../../core/admin.js';
import { decodeCursor } from '../cursor.js';
import { pageFetchSize, pageOf } from '../paging.js';
import type { AdminStore, Page, UsageStore } from '../port.js';
import { uuidv7Floor } from '../../ids.js';
import type { PostgresDatabase } from './postgres-database.js';
import { usageSql } from '../usage-sql.js';

interface AdminKeyRow {
  id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

interface AuditRow {
  id: string;
  admin_key_id: string | null;
  action: string;
  target: string | null;
  status_code: number;
  request_id: string;
  client_address: string;
  created_at: Date;
}

const ADMIN_KEY_COLUMNS = 'id, name, prefix, created_at, last_used_at, revoked_at';

const toAdminKey = (r: AdminKeyRow): AdminKeyRecord => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

const toAudit = (r: AuditRow): AdminAuditEntry => ({
  id: r.id,
  adminKeyId: r.admin_key_id,
  action: r.action,
  target: r.target,
  statusCode: r.status_code,
  requestId: r.request_id,
  clientAddress: r.client_address,
  createdAt: r.created_at,
});

/** Admin keys and the audit log on PostgreSQL. */
export class PostgresAdmin implements AdminStore {
  constructor(private readonly db: PostgresDatabase) {}

  async insertAdminKey(input: {
    id: string;
    name: string;
    prefix: string;
    hash: string;
    now: Date;
  }): Promise<AdminKeyRecord> {
    const { rows } = await this.db.query<AdminKeyRow>(
      `INSERT INTO admin_keys (id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING ${ADMIN_KEY_COLUMNS}`,
      [input.id, input.name, input.prefix, input.hash, input.now],
    );
    return toAdminKey(rows[0]);
  }

  async findActiveAdminKey(hash: string): Promise<AdminKeyRecord | null> {
    const { rows } = await this.db.query<AdminKeyRow>(
      `SELECT ${ADMIN_KEY_COLUMNS} FROM admin_keys WHERE hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    return rows[0] ? toAdminKey(rows[0]) : null;
  }

  async listAdminKeys(): Promise<AdminKeyRecord[]> {
    const { rows } = await this.db.query<AdminKeyRow>(`SELECT ${ADMIN_KEY_COLUMNS} FROM admin_keys ORDER BY id`);
    return rows.map(toAdminKey);
  }

  async revokeAdminKey(idOrPrefix: string, now: Date): Promise<boolean> {
    const result = await this.db.query(
      'UPDATE admin_keys SET revoked_at = $1 WHERE (id = $2 OR prefix = $2) AND revoked_at IS NULL',
      [now, idOrPrefix],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async markAdminKeyUsed(keyId: string, now: Date): Promise<void> {
    await this.db.query('UPDATE admin_keys SET last_used_at = $1 WHERE id = $2', [now, keyId]);
  }

  async appendAudit(entry: AdminAuditEntry): Promise<void> {
    await this.db.query(
      `INSERT INTO admin_audit_log (id, admin_key_id, action, target, status_code, request_id, client_address, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        entry.id,
        entry.adminKeyId,
        entry.action,
        entry.target,
        entry.statusCode,
        entry.requestId,
        entry.clientAddress,
        entry.createdAt,
      ],
    );
  }

  async listAudit(query: { limit: number; cursor?: string }): Promise<Page<AdminAuditEntry>> {
    const { rows } = await this.db.query<AuditRow>(
      'SELECT * FROM admin_audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2',
      [query.cursor ? decodeCursor(query.cursor) : 'g', pageFetchSize(query.limit)],
    );
    return pageOf(rows.map(toAudit), query.limit, (e) => e.id);
  }
}

/** Usage reports on PostgreSQL: one grouped read of the tasks. */
export class PostgresUsage implements UsageStore {
  constructor(private readonly db: PostgresDatabase) {}

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    const sql = usageSql(query, {
      day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
      placeholder: (index) => `$${index}`,
      integer: (sum) => `(${sum})::bigint`,
      // One range of tasks_account_usage (account_id, id), which includes what the report reads.
      account: (placeholder) => `account_id = ${placeholder}`,
    });
    const params: unknown[] = [uuidv7Floor(query.from), uuidv7Floor(query.to)];
    if (query.accountId !== undefined) params.push(query.accountId);
    const { rows } = await this.db.query<UsageRow>(sql, params);
    return rows;
  }
}
