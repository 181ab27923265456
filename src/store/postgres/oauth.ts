import type { AccountStatus } from '../../core/key-scope.js';
import type {
  ApiKeyRecord,
  OAuthClientRecord,
  OAuthCodeRecord,
  OAuthStore,
  OAuthTokenInsert,
  OAuthTokenRecord,
} from '../port.js';
import type { PostgresDatabase, Tx } from './postgres-database.js';
import { API_KEY_COLUMNS, toApiKey, type ApiKeyRow } from './rows.js';

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
  expires_at: Date;
  created_at: Date;
  used_at: Date | null;
}
interface TokenRow extends GrantRow {
  hash: string;
  kind: 'access' | 'refresh';
  expires_at: Date;
  created_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
}

const grantOf = (r: GrantRow) => ({
  familyId: r.family_id,
  clientId: r.client_id,
  accountId: r.account_id,
  keyId: r.key_id,
  resource: r.resource,
  scope: r.scope,
});

/** OAuth clients, codes and tokens of the MCP server on PostgreSQL: any API process validates any token. */
export class PostgresOAuth implements OAuthStore {
  constructor(private readonly db: PostgresDatabase) {}

  async insertOAuthClient(client: OAuthClientRecord): Promise<void> {
    await this.db.query('INSERT INTO oauth_clients (client_id, metadata, created_at) VALUES ($1, $2, $3)', [
      client.clientId,
      JSON.stringify(client.metadata),
      client.createdAt,
    ]);
  }

  async findOAuthClient(clientId: string): Promise<OAuthClientRecord | null> {
    const { rows } = await this.db.query<{ client_id: string; metadata: Record<string, unknown>; created_at: Date }>(
      'SELECT client_id, metadata, created_at FROM oauth_clients WHERE client_id = $1',
      [clientId],
    );
    const row = rows[0];
    return row ? { clientId: row.client_id, metadata: row.metadata, createdAt: row.created_at } : null;
  }

  async insertAuthorizationCode(code: Omit<OAuthCodeRecord, 'usedAt'>): Promise<void> {
    await this.db.query(
      `INSERT INTO oauth_codes (hash, family_id, client_id, account_id, key_id, resource, scope, redirect_uri,
         code_challenge, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        code.hash,
        code.familyId,
        code.clientId,
        code.accountId,
        code.keyId,
        code.resource,
        code.scope,
        code.redirectUri,
        code.codeChallenge,
        code.expiresAt,
        code.createdAt,
      ],
    );
  }

  async takeAuthorizationCode(hash: string, now: Date): Promise<OAuthCodeRecord | null> {
    return this.db.transaction(async (tx) => {
      // The row lock makes a concurrent exchange of the same code wait, then read it used.
      const { rows } = await tx.query<CodeRow>('SELECT * FROM oauth_codes WHERE hash = $1 FOR UPDATE', [hash]);
      const row = rows[0];
      if (!row) return null;
      if (row.used_at === null) await tx.query('UPDATE oauth_codes SET used_at = $2 WHERE hash = $1', [hash, now]);
      return {
        ...grantOf(row),
        hash: row.hash,
        redirectUri: row.redirect_uri,
        codeChallenge: row.code_challenge,
        expiresAt: row.expires_at,
        createdAt: row.created_at,
        usedAt: row.used_at,
      };
    });
  }

  async insertOAuthTokens(tokens: OAuthTokenInsert[]): Promise<void> {
    await this.db.transaction((tx) => insertTokens(tx, tokens));
  }

  async findOAuthToken(
    hash: string,
  ): Promise<{ token: OAuthTokenRecord; key: ApiKeyRecord; accountStatus: AccountStatus } | null> {
    const { rows } = await this.db.query<TokenRow & { account_status: AccountStatus }>(
      `SELECT t.*, a.status AS account_status FROM oauth_tokens AS t JOIN accounts AS a ON a.id = t.account_id
       WHERE t.hash = $1`,
      [hash],
    );
    const row = rows[0];
    if (!row) return null;
    const keys = await this.db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE id = $1`, [row.key_id]);
    return {
      token: {
        ...grantOf(row),
        hash: row.hash,
        kind: row.kind,
        expiresAt: row.expires_at,
        createdAt: row.created_at,
        usedAt: row.used_at,
        revokedAt: row.revoked_at,
      },
      key: toApiKey(keys.rows[0]),
      accountStatus: row.account_status,
    };
  }

  async rotateRefreshToken(hash: string, now: Date, successors: OAuthTokenInsert[]): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { rowCount } = await tx.query(
        `UPDATE oauth_tokens SET used_at = $2 WHERE hash = $1 AND kind = 'refresh' AND used_at IS NULL
           AND revoked_at IS NULL`,
        [hash, now],
      );
      if (!rowCount) return false;
      await insertTokens(tx, successors);
      return true;
    });
  }

  async revokeOAuthFamily(familyId: string, now: Date): Promise<void> {
    await this.db.query('UPDATE oauth_tokens SET revoked_at = $2 WHERE family_id = $1 AND revoked_at IS NULL', [
      familyId,
      now,
    ]);
  }
}

async function insertTokens(tx: Tx, tokens: OAuthTokenInsert[]): Promise<void> {
  for (const t of tokens)
    await tx.query(
      `INSERT INTO oauth_tokens (hash, kind, family_id, client_id, account_id, key_id, resource, scope, expires_at,
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [t.hash, t.kind, t.familyId, t.clientId, t.accountId, t.keyId, t.resource, t.scope, t.expiresAt, t.createdAt],
    );
}
