import type { AccountStatus } from '../../core/key-scope.js';
import type {
  ApiKeyRecord,
  OAuthClientRecord,
  OAuthCodeRecord,
  OAuthStore,
  OAuthTokenInsert,
  OAuthTokenRecord,
} from '../port.js';
import { toApiKey, type ApiKeyRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';

interface GrantRow {
  family_id: string;
  client_id: string;
  account_id: string;
  key_id: string;
  resource: string;
  scope: string;
}
interface CodeRow extends GrantRow {
  hash: string;
  redirect_uri: string;
  code_challenge: string;
  expires_at: number;
  created_at: number;
  used_at: number | null;
}
interface TokenRow extends GrantRow {
  hash: string;
  kind: 'access' | 'refresh';
  expires_at: number;
  created_at: number;
  used_at: number | null;
  revoked_at: number | null;
}

const date = (ms: number | null) => (ms === null ? null : new Date(ms));
const grantOf = (r: GrantRow) => ({
  familyId: r.family_id,
  clientId: r.client_id,
  accountId: r.account_id,
  keyId: r.key_id,
  resource: r.resource,
  scope: r.scope,
});

/** OAuth clients, codes and tokens of the MCP server on the embedded store. */
export class SqliteOAuth implements OAuthStore {
  constructor(private readonly db: SqliteDatabase) {}

  async insertOAuthClient(client: OAuthClientRecord): Promise<void> {
    this.db.write(() =>
      this.db
        .statement('INSERT INTO oauth_clients (client_id, metadata, created_at) VALUES (?, ?, ?)')
        .run(client.clientId, JSON.stringify(client.metadata), client.createdAt.getTime()),
    );
  }

  async findOAuthClient(clientId: string): Promise<OAuthClientRecord | null> {
    const row = this.db.statement('SELECT * FROM oauth_clients WHERE client_id = ?').get(clientId) as
      | { client_id: string; metadata: string; created_at: number }
      | undefined;
    return row
      ? { clientId: row.client_id, metadata: JSON.parse(row.metadata), createdAt: new Date(row.created_at) }
      : null;
  }

  async insertAuthorizationCode(code: Omit<OAuthCodeRecord, 'usedAt'>): Promise<void> {
    this.db.write(() =>
      this.db
        .statement(
          `INSERT INTO oauth_codes (hash, family_id, client_id, account_id, key_id, resource, scope, redirect_uri,
             code_challenge, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          code.hash,
          code.familyId,
          code.clientId,
          code.accountId,
          code.keyId,
          code.resource,
          code.scope,
          code.redirectUri,
          code.codeChallenge,
          code.expiresAt.getTime(),
          code.createdAt.getTime(),
        ),
    );
  }

  async takeAuthorizationCode(hash: string, now: Date): Promise<OAuthCodeRecord | null> {
    return this.db.write(() => {
      const row = this.db.statement('SELECT * FROM oauth_codes WHERE hash = ?').get(hash) as CodeRow | undefined;
      if (!row) return null;
      if (row.used_at === null)
        this.db.statement('UPDATE oauth_codes SET used_at = ? WHERE hash = ?').run(now.getTime(), hash);
      return {
        ...grantOf(row),
        hash: row.hash,
        redirectUri: row.redirect_uri,
        codeChallenge: row.code_challenge,
        expiresAt: new Date(row.expires_at),
        createdAt: new Date(row.created_at),
        usedAt: date(row.used_at),
      };
    });
  }

  async insertOAuthTokens(tokens: OAuthTokenInsert[]): Promise<void> {
    this.db.write(() => this.insertTokens(tokens));
  }

  async findOAuthToken(
    hash: string,
  ): Promise<{ token: OAuthTokenRecord; key: ApiKeyRecord; accountStatus: AccountStatus } | null> {
    const row = this.db
      .statement(
        `SELECT t.*, a.status AS account_status FROM oauth_tokens AS t JOIN accounts AS a ON a.id = t.account_id
         WHERE t.hash = ?`,
      )
      .get(hash) as (TokenRow & { account_status: AccountStatus }) | undefined;
    if (!row) return null;
    const key = this.db.statement('SELECT * FROM api_keys WHERE id = ?').get(row.key_id) as ApiKeyRow;
    return {
      token: {
        ...grantOf(row),
        hash: row.hash,
        kind: row.kind,
        expiresAt: new Date(row.expires_at),
        createdAt: new Date(row.created_at),
        usedAt: date(row.used_at),
        revokedAt: date(row.revoked_at),
      },
      key: toApiKey(key),
      accountStatus: row.account_status,
    };
  }

  async rotateRefreshToken(hash: string, now: Date, successors: OAuthTokenInsert[]): Promise<boolean> {
    return this.db.write(() => {
      const { changes } = this.db
        .statement(
          `UPDATE oauth_tokens SET used_at = ? WHERE hash = ? AND kind = 'refresh' AND used_at IS NULL
             AND revoked_at IS NULL`,
        )
        .run(now.getTime(), hash);
      if (changes === 0) return false;
      this.insertTokens(successors);
      return true;
    });
  }

  async revokeOAuthFamily(familyId: string, now: Date): Promise<void> {
    this.db.write(() =>
      this.db
        .statement('UPDATE oauth_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL')
        .run(now.getTime(), familyId),
    );
  }

  private insertTokens(tokens: OAuthTokenInsert[]): void {
    const insert = this.db.statement(
      `INSERT INTO oauth_tokens (hash, kind, family_id, client_id, account_id, key_id, resource, scope, expires_at,
         created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const t of tokens)
      insert.run(
        t.hash,
        t.kind,
        t.familyId,
        t.clientId,
        t.accountId,
        t.keyId,
        t.resource,
        t.scope,
        t.expiresAt.getTime(),
        t.createdAt.getTime(),
      );
  }
}
