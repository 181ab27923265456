import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { OAuthClientMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { newIdAt } from '../ids.js';
import type { ApiKeyRecord, OAuthGrant, OAuthStore, OAuthTokenInsert, Store } from '../store/port.js';
import { type Caller, hashApiKey, isWellFormedApiKey } from './api-keys.js';

/**
 * OAuth 2.1 for the MCP server (docs/design.md §3.10, decision 0034): the service is its own
 * authorization server, and /mcp the one protected resource. A person approves a client with an
 * API key of their account; the client gets opaque tokens bound to that account, that key and /mcp.
 */

export const ACCESS_TOKEN_TTL_MS = 3600_000;
export const REFRESH_TOKEN_TTL_MS = 30 * 24 * 3600_000;
export const AUTHORIZATION_CODE_TTL_MS = 60_000;
/** The one scope: what the account's API key may do on /mcp. */
export const MCP_SCOPE = 'mcp';

const ACCESS_TOKEN_PREFIX = 'igat_';
const REFRESH_TOKEN_PREFIX = 'igrt_';
const CODE_PREFIX = 'igac_';
const TOKEN_PATTERN = /^ig(at|rt|ac)_[A-Za-z0-9_-]{43}$/;
/** RFC 7636: 43 to 128 characters of the unreserved set. */
const CODE_VERIFIER_PATTERN = /^[A-Za-z0-9._~-]{43,128}$/;
const CODE_CHALLENGE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** An error of the OAuth protocol, as its endpoints answer it: `{error, error_description}`. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}

/** A client as the authorization endpoint knows it: registered, or read from its metadata document. */
export interface OAuthClient {
  clientId: string;
  clientName: string | null;
  redirectUris: string[];
}

/** An authorization request whose client and redirect URI were checked: errors may now go to the redirect URI. */
export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  state: string | null;
  codeChallenge: string;
  resource: string;
  scope: string;
}

export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

/** Reads client ID metadata documents (client-metadata-document.ts). */
export interface ClientDocumentReader {
  names(clientId: string): boolean;
  read(clientId: string): Promise<Record<string, unknown>>;
}

export interface OAuthServiceOptions {
  store: Pick<Store, 'oauth' | 'accounts'>;
  /** PUBLIC_BASE_URL: the issuer. */
  issuer: string;
  now: () => Date;
  /** Client ID metadata documents; without: only registered clients. */
  clientDocuments?: ClientDocumentReader;
}

const hashOf = (secret: string) => hashApiKey(secret);
const newSecret = (prefix: string) => prefix + randomBytes(32).toString('base64url');

/** PKCE S256 (RFC 7636 section 4.6): BASE64URL(SHA256(verifier)) equals the challenge, compared in constant time. */
export function pkceS256Matches(verifier: string, challenge: string): boolean {
  if (!CODE_VERIFIER_PATTERN.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

export class OAuthService {
  readonly issuer: string;
  /** The protected resource: RFC 8707's resource indicator every token is bound to. */
  readonly resource: string;
  readonly protectedResourceMetadataUrl: string;
  private readonly store: OAuthStore;

  constructor(private readonly options: OAuthServiceOptions) {
    this.issuer = options.issuer;
    this.resource = `${options.issuer}/mcp`;
    this.protectedResourceMetadataUrl = `${options.issuer}/.well-known/oauth-protected-resource/mcp`;
    this.store = options.store.oauth;
  }

  /** RFC 9728 protected resource metadata of /mcp. */
  protectedResourceMetadata() {
    return {
      resource: this.resource,
      authorization_servers: [this.issuer],
      scopes_supported: [MCP_SCOPE],
      bearer_methods_supported: ['header'],
      resource_name: 'Image generation MCP server',
    };
  }

  /** RFC 8414 authorization server metadata. */
  authorizationServerMetadata() {
    return {
      issuer: this.issuer,
      authorization_endpoint: `${this.issuer}/oauth/authorize`,
      token_endpoint: `${this.issuer}/oauth/token`,
      registration_endpoint: `${this.issuer}/oauth/register`,
      revocation_endpoint: `${this.issuer}/oauth/revoke`,
      scopes_supported: [MCP_SCOPE],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: this.options.clientDocuments !== undefined,
    };
  }

  /** RFC 7591 registration of a public client (no secret: PKCE protects its codes). */
  async registerClient(body: unknown) {
    const metadata = clientMetadataOf(body, 'invalid_client_metadata');
    const now = this.options.now();
    const clientId = newIdAt(now);
    const accepted = {
      ...metadata,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    };
    await this.store.insertOAuthClient({ clientId, metadata: accepted, createdAt: now });
    return { client_id: clientId, client_id_issued_at: Math.floor(now.getTime() / 1000), ...accepted };
  }

  /** The client named by client_id: registered here, or (an https URL) its metadata document. */
  async findClient(clientId: string): Promise<OAuthClient | null> {
    const documents = this.options.clientDocuments;
    if (documents?.names(clientId)) {
      const document = await documents.read(clientId);
      if (document.client_id !== clientId)
        throw new OAuthError('invalid_client', 'The client metadata document names another client_id.');
      const metadata = clientMetadataOf(document, 'invalid_client');
      return { clientId, clientName: metadata.client_name ?? null, redirectUris: metadata.redirect_uris };
    }
    const found = await this.store.findOAuthClient(clientId);
    if (!found) return null;
    const metadata = found.metadata as { client_name?: string; redirect_uris: string[] };
    return { clientId, clientName: metadata.client_name ?? null, redirectUris: metadata.redirect_uris };
  }

  /**
   * The checks made before anything may be sent to the redirect URI: a known client and one of its
   * registered redirect URIs, exactly. Throws OAuthError (shown to the person, never redirected).
   */
  async clientAndRedirect(
    query: Record<string, string | undefined>,
  ): Promise<{ client: OAuthClient; redirectUri: string }> {
    const clientId = query.client_id;
    if (!clientId) throw new OAuthError('invalid_request', 'The request names no client_id.');
    const client = await this.findClient(clientId);
    if (!client) throw new OAuthError('invalid_client', 'This client is not registered here.');
    const redirectUri = query.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
    if (!redirectUri || !client.redirectUris.includes(redirectUri))
      throw new OAuthError('invalid_request', 'The redirect_uri is not one this client registered.');
    return { client, redirectUri };
  }

  /** The rest of the request's checks: errors here go back to the client's redirect URI (authorizationError). */
  checkAuthorizationRequest(
    checked: { client: OAuthClient; redirectUri: string },
    query: Record<string, string | undefined>,
  ): AuthorizationRequest {
    if (query.response_type !== 'code')
      throw new OAuthError('unsupported_response_type', 'Only response_type=code is supported.');
    if (query.code_challenge_method !== 'S256')
      throw new OAuthError('invalid_request', 'PKCE is required: code_challenge_method=S256 (plain is refused).');
    if (!query.code_challenge || !CODE_CHALLENGE_PATTERN.test(query.code_challenge))
      throw new OAuthError('invalid_request', 'code_challenge must be the base64url SHA-256 of the code verifier.');
    const resource = query.resource ?? this.resource;
    if (resource !== this.resource) throw new OAuthError('invalid_target', `The only resource is ${this.resource}.`);
    const scope = this.scopeOf(query.scope);
    return { ...checked, state: query.state ?? null, codeChallenge: query.code_challenge, resource, scope };
  }

  /** The code a person's approval gives, bound to the account and key of the API key they typed. */
  async approve(request: AuthorizationRequest, apiKey: string): Promise<string | null> {
    const caller = await this.callerOfKey(apiKey);
    if (!caller) return null;
    const now = this.options.now();
    const code = newSecret(CODE_PREFIX);
    await this.store.insertAuthorizationCode({
      hash: hashOf(code),
      familyId: newIdAt(now),
      clientId: request.client.clientId,
      accountId: caller.accountId,
      keyId: caller.keyId,
      resource: request.resource,
      scope: request.scope,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      expiresAt: new Date(now.getTime() + AUTHORIZATION_CODE_TTL_MS),
      createdAt: now,
    });
    return code;
  }

  /** The authorization_code grant (RFC 6749 section 4.1.3 with RFC 7636 and RFC 8707). */
  async exchangeCode(body: Record<string, string | undefined>): Promise<TokenAnswer> {
    const { code, code_verifier: verifier, client_id: clientId, redirect_uri: redirectUri } = body;
    if (!code || !verifier || !clientId)
      throw new OAuthError('invalid_request', 'code, code_verifier and client_id are required.');
    const now = this.options.now();
    const found = TOKEN_PATTERN.test(code) ? await this.store.takeAuthorizationCode(hashOf(code), now) : null;
    const invalid = new OAuthError('invalid_grant', 'The code is unknown, expired, used, or not this client’s.');
    if (!found || found.clientId !== clientId) throw invalid;
    if (found.usedAt) {
      // A code replayed: whoever holds it may have stolen it; the tokens it gave are revoked (OAuth 2.1 section 4.1.3).
      await this.store.revokeOAuthFamily(found.familyId, now);
      throw invalid;
    }
    if (found.expiresAt <= now) throw invalid;
    if (redirectUri !== undefined && redirectUri !== found.redirectUri)
      throw new OAuthError('invalid_grant', 'The redirect_uri is not the one the code was issued for.');
    if (!pkceS256Matches(verifier, found.codeChallenge))
      throw new OAuthError('invalid_grant', 'The code_verifier does not match the code_challenge.');
    if (body.resource !== undefined && body.resource !== found.resource)
      throw new OAuthError('invalid_target', `The code was issued for ${found.resource}.`);
    if (!(await this.activeKey(found.accountId, found.keyId))) throw invalid;
    return this.issue(found, now, (tokens) => this.store.insertOAuthTokens(tokens));
  }

  /** The refresh_token grant: the token rotates; a used one revokes its whole family. */
  async refresh(body: Record<string, string | undefined>): Promise<TokenAnswer> {
    const { refresh_token: refreshToken, client_id: clientId } = body;
    if (!refreshToken || !clientId)
      throw new OAuthError('invalid_request', 'refresh_token and client_id are required.');
    const now = this.options.now();
    const invalid = new OAuthError('invalid_grant', 'The refresh token is unknown, expired, revoked or used.');
    const found = refreshToken.startsWith(REFRESH_TOKEN_PREFIX)
      ? await this.store.findOAuthToken(hashOf(refreshToken))
      : null;
    if (found?.token.kind !== 'refresh' || found.token.clientId !== clientId) throw invalid;
    const { token } = found;
    if (token.usedAt && !token.revokedAt) {
      await this.store.revokeOAuthFamily(token.familyId, now);
      throw invalid;
    }
    if (token.revokedAt || token.expiresAt <= now || found.key.revokedAt !== null) throw invalid;
    if (body.resource !== undefined && body.resource !== token.resource)
      throw new OAuthError('invalid_target', `The grant is for ${token.resource}.`);
    const scope = body.scope === undefined ? token.scope : this.scopeOf(body.scope);
    return this.issue({ ...token, scope }, now, async (tokens) => {
      // Two refreshes racing with the same token: one rotates it, the other is a reuse.
      if (!(await this.store.rotateRefreshToken(token.hash, now, tokens))) {
        await this.store.revokeOAuthFamily(token.familyId, now);
        throw invalid;
      }
    });
  }

  /** RFC 7009: revoking either token of a grant revokes the grant; unknown tokens are not an error. */
  async revoke(body: Record<string, string | undefined>): Promise<void> {
    const { token, client_id: clientId } = body;
    if (!token) throw new OAuthError('invalid_request', 'token is required.');
    if (!TOKEN_PATTERN.test(token)) return;
    const found = await this.store.findOAuthToken(hashOf(token));
    if (!found || (clientId !== undefined && found.token.clientId !== clientId)) return;
    await this.store.revokeOAuthFamily(found.token.familyId, this.options.now());
  }

  /**
   * The caller an access token speaks for on /mcp, or null: unknown, expired, revoked, another
   * resource's, or issued through an API key since revoked.
   */
  async callerOfAccessToken(accessToken: string): Promise<Caller | null> {
    if (!accessToken.startsWith(ACCESS_TOKEN_PREFIX) || !TOKEN_PATTERN.test(accessToken)) return null;
    const found = await this.store.findOAuthToken(hashOf(accessToken));
    if (!found || found.key.revokedAt !== null) return null;
    const { token, key, accountStatus } = found;
    if (token.kind !== 'access' || token.revokedAt || token.expiresAt <= this.options.now()) return null;
    if (token.resource !== this.resource) return null;
    // The key's scope goes with its tokens: a token can do no more than the key it was approved with.
    return {
      accountId: token.accountId,
      keyId: key.id,
      keyName: key.name,
      keyPrefix: key.prefix,
      scope: key.scope,
      accountStatus,
    };
  }

  private scopeOf(requested: string | undefined): string {
    if (requested === undefined || requested === '') return MCP_SCOPE;
    const scopes = requested.split(' ').filter(Boolean);
    if (!scopes.every((s) => s === MCP_SCOPE)) throw new OAuthError('invalid_scope', `The only scope is ${MCP_SCOPE}.`);
    return MCP_SCOPE;
  }

  private async callerOfKey(apiKey: string): Promise<{ accountId: string; keyId: string } | null> {
    if (!isWellFormedApiKey(apiKey)) return null;
    const found = await this.options.store.accounts.findActiveApiKey(hashApiKey(apiKey));
    return found ? { accountId: found.account.id, keyId: found.key.id } : null;
  }

  private async activeKey(accountId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const key = (await this.options.store.accounts.listApiKeys(accountId)).find((k) => k.id === keyId);
    return key && key.revokedAt === null ? key : null;
  }

  private async issue(
    grant: OAuthGrant,
    now: Date,
    save: (tokens: OAuthTokenInsert[]) => Promise<void>,
  ): Promise<TokenAnswer> {
    const accessToken = newSecret(ACCESS_TOKEN_PREFIX);
    const refreshToken = newSecret(REFRESH_TOKEN_PREFIX);
    const base = {
      familyId: grant.familyId,
      clientId: grant.clientId,
      accountId: grant.accountId,
      keyId: grant.keyId,
      resource: grant.resource,
      scope: grant.scope,
      createdAt: now,
    };
    await save([
      { ...base, hash: hashOf(accessToken), kind: 'access', expiresAt: new Date(now.getTime() + ACCESS_TOKEN_TTL_MS) },
      {
        ...base,
        hash: hashOf(refreshToken),
        kind: 'refresh',
        expiresAt: new Date(now.getTime() + REFRESH_TOKEN_TTL_MS),
      },
    ]);
    return {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_TTL_MS / 1000,
      refresh_token: refreshToken,
      scope: grant.scope,
    };
  }
}

/** Client metadata (RFC 7591 section 2) read with the MCP SDK's own schema; redirect URIs https, or http on loopback. */
function clientMetadataOf(body: unknown, error: string) {
  const parsed = OAuthClientMetadataSchema.safeParse(body);
  if (!parsed.success)
    throw new OAuthError(error, `The client metadata is not valid: ${parsed.error.issues[0]?.message ?? 'invalid'}.`);
  const metadata = parsed.data;
  if (metadata.redirect_uris.length === 0)
    throw new OAuthError('invalid_redirect_uri', 'Name at least one redirect_uri.');
  for (const uri of metadata.redirect_uris)
    if (!isAcceptableRedirectUri(uri))
      throw new OAuthError('invalid_redirect_uri', `${uri} is not a redirect URI this server sends codes to.`);
  // A confidential client's method asked for is replaced (RFC 7591 section 3.2.1): every client here is public.
  return { ...metadata, token_endpoint_auth_method: 'none' };
}

/**
 * https; http on a loopback address only (a native app's listener, RFC 8252 section 7.3); a private-use
 * scheme of a native app (RFC 8252 section 7.1); never a fragment, nor a scheme that runs or reads something.
 */
function isAcceptableRedirectUri(uri: string): boolean {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  if (url.hash !== '' || uri.includes('#')) return false;
  if (url.protocol === 'https:') return true;
  if (url.protocol === 'http:') return ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
  return !['javascript:', 'data:', 'file:', 'vbscript:', 'blob:', 'about:', 'ws:', 'wss:'].includes(url.protocol);
}
