import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { buildTestApp, fileTestApp } from '../helpers/app.js';
import { CHROMIUM, launchChromium, SCREENSHOT_DIR } from '../helpers/chromium.js';
import { callTool } from '../helpers/mcp.js';
import { freePort } from '../helpers/processes.js';

/**
 * OAuth for /mcp (docs/design.md §3.10, decision 0034), proven with the MCP SDK's own client and its
 * OAuth provider, the consent approved in Chromium. The issuer is PUBLIC_BASE_URL, so the app
 * listens on a port chosen before it is built.
 */
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
/** The app's clock runs this far ahead of the real one (the expiry test moves it). */
let clockAheadMs = 0;
// WEBHOOK_ALLOW_PRIVATE: the client metadata documents are served from loopback (the SSRF guard's
// refusals are test/services/client-metadata-document.test.ts's).
const ctx = fileTestApp(
  { PUBLIC_BASE_URL: base, PORT: String(port), RATE_LIMIT_OAUTH_PER_MIN: '40', WEBHOOK_ALLOW_PRIVATE: 'true' },
  { now: () => new Date(Date.now() + clockAheadMs) },
);
let listening: Promise<unknown> | undefined;
const listen = () => {
  listening ??= ctx().app.listen({ port, host: '127.0.0.1' });
  return listening;
};

const skipBrowser = !existsSync(CHROMIUM) && `no ${CHROMIUM}`;
/** A loopback redirect URI (RFC 8252) of the clients that no browser follows. */
const CALLBACK = 'http://127.0.0.1:47999/callback';

/** The SDK's OAuthClientProvider as a CLI agent would write it, kept in memory. */
class MemoryProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier?: string;
  authorizationUrl?: URL;
  readonly expectedState = randomBytes(16).toString('base64url');
  constructor(readonly redirectUrl = CALLBACK) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test <agent>',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return this.expectedState;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    if (!this.verifier) throw new Error('no verifier');
    return this.verifier;
  }
}

/** A form POST, as a browser or the SDK sends it. */
function postForm(url: string, fields: Record<string, string>, cookie?: string) {
  return ctx().app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie && { cookie }) },
    payload: new URLSearchParams(fields).toString(),
  });
}

/** The consent page's form fields and CSRF cookie, read from GET /oauth/authorize. */
async function openConsent(query: Record<string, string>) {
  const { app } = ctx();
  const page = await app.inject({ method: 'GET', url: `/oauth/authorize?${new URLSearchParams(query)}` });
  const fields: Record<string, string> = {};
  for (const match of page.body.matchAll(/<input type="hidden" name="([a-z_]+)" value="([^"]*)">/g))
    fields[match[1]] = match[2]
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  const cookie = String(page.headers['set-cookie'] ?? '').split(';')[0];
  return { page, fields, cookie };
}

/** Approves through the form (no browser): the redirect's query. */
async function approve(query: Record<string, string>, apiKey: string, decision = 'approve') {
  const { fields, cookie } = await openConsent(query);
  const answer = await postForm('/oauth/authorize', { ...fields, api_key: apiKey, decision }, cookie);
  return { answer, redirect: answer.headers.location ? new URL(String(answer.headers.location)) : null };
}

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

/** A registered client and an authorization request of it, with PKCE. */
async function registeredClient(redirectUri = CALLBACK) {
  const { app } = ctx();
  const registered = await app.inject({
    method: 'POST',
    url: '/oauth/register',
    payload: { client_name: 'Hostile test', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' },
  });
  if (registered.statusCode !== 201) throw new Error(`registration refused: ${registered.body}`);
  const clientId = registered.json().client_id as string;
  const { verifier, challenge } = pkce();
  const query = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st-1',
    resource: `${base}/mcp`,
  };
  return { clientId, verifier, query };
}

const token = (fields: Record<string, string>) => postForm('/oauth/token', fields);

/** The token endpoint's answer to a code's exchange, with the fields a test changes to see it refused. */
const exchangeCode = (code: string, verifier: string, clientId: string, changed: Record<string, string> = {}) =>
  token({
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    client_id: clientId,
    redirect_uri: CALLBACK,
    ...changed,
  });

/** A code approved by a new account's key, and its tokens. */
async function grant() {
  const account = await ctx().newAccount(1234);
  const client = await registeredClient();
  const { redirect } = await approve(client.query, account.key);
  const code = redirect?.searchParams.get('code') ?? '';
  const answer = await exchangeCode(code, client.verifier, client.clientId, { resource: `${base}/mcp` });
  return { account, client, code, tokens: answer.json() as OAuthTokens & { refresh_token: string } };
}

async function mcpStatus(bearer: string) {
  const { app } = ctx();
  return app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { authorization: `Bearer ${bearer}`, accept: 'application/json, text/event-stream' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  });
}

t.test('discovery: protected resource and authorization server metadata', async (t) => {
  const { app } = ctx();
  for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    const prm = await app.inject({ method: 'GET', url: path });
    t.equal(prm.statusCode, 200);
    t.match(prm.json(), {
      resource: `${base}/mcp`,
      authorization_servers: [base],
      scopes_supported: ['mcp'],
      bearer_methods_supported: ['header'],
    });
  }
  const asm = (await app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).json();
  t.match(asm, {
    issuer: base,
    authorization_endpoint: `${base}/oauth/authorize`,
    token_endpoint: `${base}/oauth/token`,
    registration_endpoint: `${base}/oauth/register`,
    revocation_endpoint: `${base}/oauth/revoke`,
    code_challenge_methods_supported: ['S256'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
  });
});

t.test('a 401 of /mcp names the resource metadata; invalid_token when a token was sent', async (t) => {
  const { app } = ctx();
  const none = await app.inject({ method: 'POST', url: '/mcp', payload: {} });
  t.equal(none.statusCode, 401);
  t.equal(
    none.headers['www-authenticate'],
    `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
  );
  const bad = await mcpStatus(`igat_${randomBytes(32).toString('base64url')}`);
  t.equal(bad.statusCode, 401);
  t.equal(
    bad.headers['www-authenticate'],
    `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", error="invalid_token"`,
  );
  const { key } = await ctx().newAccount();
  t.equal((await mcpStatus(key)).statusCode, 200, 'an API key still works on /mcp');
});

t.test(
  'the SDK client end to end: 401, discovery, registration, consent in Chromium, code with PKCE, token, tools for the approving account, refresh',
  { skip: skipBrowser },
  async (t) => {
    await listen();
    const account = await ctx().newAccount(4321);
    // The agent's loopback listener (RFC 8252 section 7.3), which the consent's redirect reaches.
    let callback: URL | undefined;
    let reached = () => {};
    const callbackReached = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const listener = createServer((request, response) => {
      response.end('back in the client');
      // The page's /favicon.ico follows; only the redirect counts.
      if (!request.url?.startsWith('/callback')) return;
      callback = new URL(request.url, 'http://127.0.0.1');
      reached();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    t.teardown(() => listener.close());
    const provider = new MemoryProvider(`http://127.0.0.1:${(listener.address() as AddressInfo).port}/callback`);
    const mcpUrl = new URL('/mcp', base);
    const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
    await t.rejects(new Client({ name: 'oauth-test', version: '1' }).connect(first), { message: /Unauthorized/ });
    t.ok(provider.client?.client_id, 'the client registered itself');
    const authorizationUrl = provider.authorizationUrl;
    if (!authorizationUrl) throw new Error('the SDK did not ask for authorization');
    t.equal(authorizationUrl.origin + authorizationUrl.pathname, `${base}/oauth/authorize`);
    t.equal(authorizationUrl.searchParams.get('code_challenge_method'), 'S256');
    t.equal(authorizationUrl.searchParams.get('resource'), `${base}/mcp`);

    const browser = await launchChromium(t);
    const page = await browser.newPage();
    const consoleErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    const response = await page.goto(authorizationUrl.href);
    const headers = response?.headers() ?? {};
    t.match(headers['content-security-policy'], /frame-ancestors 'none'/);
    t.equal(headers['x-frame-options'], 'DENY');
    t.equal(await page.locator('#client-name').textContent(), 'Test <agent>', 'the page names the client (escaped)');
    await page.getByLabel('API key of your account').fill(account.key);
    await page.screenshot({ path: `${SCREENSHOT_DIR}/oauth-consent.png` }).catch(() => {});
    await page.getByRole('button', { name: 'Allow' }).click();
    await callbackReached;
    t.strictSame(consoleErrors, [], 'no CSP violation (its style, the form and its redirect)');
    if (!callback) throw new Error('no callback');
    t.equal(callback.searchParams.get('state'), provider.expectedState, 'state passed back');
    t.equal(callback.searchParams.get('iss'), base, 'the issuer named (RFC 9207)');
    const code = callback.searchParams.get('code');
    t.match(code, /^igac_/);

    await first.finishAuth(code as string);
    t.match(provider.saved, { token_type: 'Bearer', expires_in: 3600, scope: 'mcp' });
    const client = new Client({ name: 'oauth-test', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
    t.teardown(() => client.close());
    const tools = await client.listTools();
    t.ok(
      tools.tools.some((tool) => tool.name === 'generate_image'),
      'tools listed',
    );
    const balance = await callTool(client, 'get_balance');
    t.match(JSON.stringify(balance.structuredContent), /4321/, 'a tool run for the approving account');

    // A refresh through the SDK: new tokens, the old refresh token spent.
    const before = provider.saved as OAuthTokens & { refresh_token: string };
    t.equal(await auth(provider, { serverUrl: mcpUrl }), 'AUTHORIZED');
    const after = provider.saved as OAuthTokens & { refresh_token: string };
    t.not(after.access_token, before.access_token);
    t.not(after.refresh_token, before.refresh_token, 'the refresh token rotated');
    t.equal((await mcpStatus(after.access_token)).statusCode, 200);
  },
);

t.test(
  'PKCE: a wrong verifier is refused; plain and a missing challenge are refused at the redirect URI',
  async (t) => {
    const account = await ctx().newAccount();
    const { query, clientId } = await registeredClient();
    const { redirect } = await approve(query, account.key);
    const code = redirect?.searchParams.get('code') ?? '';
    const wrong = await exchangeCode(code, pkce().verifier, clientId);
    t.equal(wrong.statusCode, 400);
    t.equal(wrong.json().error, 'invalid_grant');

    const { app } = ctx();
    const plain = await app.inject({
      method: 'GET',
      url: `/oauth/authorize?${new URLSearchParams({ ...query, code_challenge_method: 'plain' })}`,
    });
    t.equal(plain.statusCode, 302);
    const location = new URL(String(plain.headers.location));
    t.equal(location.origin + location.pathname, CALLBACK);
    t.equal(location.searchParams.get('error'), 'invalid_request');
    t.equal(location.searchParams.get('state'), 'st-1');
  },
);

t.test('resource indicators: only /mcp; a code is exchanged for the resource it was issued for', async (t) => {
  const { app } = ctx();
  const account = await ctx().newAccount();
  const { verifier, query, clientId } = await registeredClient();
  const other = await app.inject({
    method: 'GET',
    url: `/oauth/authorize?${new URLSearchParams({ ...query, resource: `${base}/api/v1` })}`,
  });
  t.equal(new URL(String(other.headers.location)).searchParams.get('error'), 'invalid_target');
  const { redirect } = await approve(query, account.key);
  const answer = await exchangeCode(redirect?.searchParams.get('code') ?? '', verifier, clientId, {
    resource: 'https://elsewhere.example/mcp',
  });
  t.equal(answer.json().error, 'invalid_target');
});

t.test('a code is single-use: a replay is refused and revokes the tokens it gave', async (t) => {
  const { client, code, tokens } = await grant();
  t.equal((await mcpStatus(tokens.access_token)).statusCode, 200);
  const again = await exchangeCode(code, client.verifier, client.clientId);
  t.equal(again.json().error, 'invalid_grant');
  t.equal((await mcpStatus(tokens.access_token)).statusCode, 401, 'the first exchange’s token is revoked');
});

t.test('a code expires after a minute', async (t) => {
  const account = await ctx().newAccount();
  const { verifier, query, clientId } = await registeredClient();
  const { redirect } = await approve(query, account.key);
  clockAheadMs = 61_000;
  try {
    const late = await exchangeCode(redirect?.searchParams.get('code') ?? '', verifier, clientId);
    t.equal(late.json().error, 'invalid_grant');
  } finally {
    clockAheadMs = 0;
  }
});

t.test("another client's code is refused", async (t) => {
  const account = await ctx().newAccount();
  const mine = await registeredClient();
  const other = await registeredClient();
  const { redirect } = await approve(mine.query, account.key);
  const answer = await exchangeCode(redirect?.searchParams.get('code') ?? '', mine.verifier, other.clientId);
  t.equal(answer.json().error, 'invalid_grant');
});

t.test('redirect URIs match exactly; a mismatch is shown, never redirected', async (t) => {
  const { app } = ctx();
  const { query } = await registeredClient();
  for (const redirectUri of [`${CALLBACK}/x`, `${CALLBACK}?x=1`, 'https://evil.example/callback']) {
    const answer = await app.inject({
      method: 'GET',
      url: `/oauth/authorize?${new URLSearchParams({ ...query, redirect_uri: redirectUri })}`,
    });
    t.equal(answer.statusCode, 400, redirectUri);
    t.notOk(answer.headers.location, 'not redirected');
    t.match(answer.body, /redirect_uri is not one this client registered/);
  }
  const unknown = await app.inject({
    method: 'GET',
    url: `/oauth/authorize?${new URLSearchParams({ ...query, client_id: 'nobody' })}`,
  });
  t.equal(unknown.statusCode, 400);
  t.notOk(unknown.headers.location);
  const javascript = await app.inject({
    method: 'POST',
    url: '/oauth/register',
    payload: { redirect_uris: ['javascript:alert(1)'] },
  });
  t.equal(javascript.statusCode, 400);
});

t.test(
  'the consent form: a wrong key is refused on the page; deny goes back with access_denied; no CSRF cookie, no code',
  async (t) => {
    const account = await ctx().newAccount();
    const { query } = await registeredClient();
    const wrongKey = await approve(query, `igk_${randomBytes(32).toString('base64url')}`);
    t.equal(wrongKey.answer.statusCode, 401);
    t.match(wrongKey.answer.body, /unknown or revoked/);
    const denied = await approve(query, account.key, 'deny');
    t.equal(denied.redirect?.searchParams.get('error'), 'access_denied');
    t.ok(denied.redirect?.searchParams.get('iss'), 'an error response names the issuer too (RFC 9207)');
    t.equal(denied.redirect?.searchParams.get('state'), 'st-1');
    const { fields } = await openConsent(query);
    const forged = await postForm(
      '/oauth/authorize',
      { ...fields, api_key: account.key, decision: 'approve' },
      'oauth_csrf=forged',
    );
    t.equal(forged.statusCode, 403);
    t.notOk(forged.headers.location);
  },
);

t.test(
  'tokens: an expired access token and a revoked one are refused; revoking the API key revokes its tokens',
  async (t) => {
    const { store } = ctx();
    const expired = await grant();
    clockAheadMs = 3600_000 + 1000;
    try {
      t.equal((await mcpStatus(expired.tokens.access_token)).statusCode, 401, 'an hour later');
    } finally {
      clockAheadMs = 0;
    }
    const revoked = await grant();
    const revoke = await postForm('/oauth/revoke', {
      token: revoked.tokens.refresh_token,
      client_id: revoked.client.clientId,
    });
    t.equal(revoke.statusCode, 200);
    t.equal((await mcpStatus(revoked.tokens.access_token)).statusCode, 401, 'the grant is revoked');

    const byKey = await grant();
    t.equal((await mcpStatus(byKey.tokens.access_token)).statusCode, 200);
    const [key] = await store.accounts.listApiKeys(byKey.account.accountId);
    await store.accounts.revokeApiKey(key.id, new Date());
    t.equal((await mcpStatus(byKey.tokens.access_token)).statusCode, 401, 'the key revoked');
    const refreshed = await token({
      grant_type: 'refresh_token',
      refresh_token: byKey.tokens.refresh_token,
      client_id: byKey.client.clientId,
    });
    t.equal(refreshed.json().error, 'invalid_grant');
  },
);

t.test('refresh tokens rotate; a reused one revokes its family', async (t) => {
  const { client, tokens } = await grant();
  const first = await token({
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token,
    client_id: client.clientId,
  });
  t.equal(first.statusCode, 200);
  const next = first.json() as { access_token: string; refresh_token: string };
  t.equal((await mcpStatus(next.access_token)).statusCode, 200);
  const reused = await token({
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token,
    client_id: client.clientId,
  });
  t.equal(reused.json().error, 'invalid_grant');
  t.equal((await mcpStatus(next.access_token)).statusCode, 401, 'the family is revoked');
  const successor = await token({
    grant_type: 'refresh_token',
    refresh_token: next.refresh_token,
    client_id: client.clientId,
  });
  t.equal(successor.json().error, 'invalid_grant', 'its successor too');
});

t.test('tokens are stored as hashes only', async (t) => {
  const { tokens, code } = await grant();
  const { store } = ctx();
  t.equal(await store.oauth.findOAuthToken(tokens.access_token), null, 'not findable by the token itself');
  t.equal(await store.oauth.takeAuthorizationCode(code, new Date()), null);
  const hash = createHash('sha256').update(tokens.access_token).digest('hex');
  t.match(await store.oauth.findOAuthToken(hash), { token: { kind: 'access', resource: `${base}/mcp` } });
});

t.test(
  'a client known by its metadata document URL: read at authorization, named on the page, its code exchanged',
  async (t) => {
    const account = await ctx().newAccount();
    const documents = new Map<string, unknown>();
    const host = createServer((request, response) => {
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify(documents.get(request.url ?? '') ?? {}));
    });
    await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
    t.teardown(() => host.close());
    const origin = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
    const clientId = `${origin}/oauth/client.json`;
    documents.set('/oauth/client.json', {
      client_id: clientId,
      client_name: 'Documented agent',
      redirect_uris: [CALLBACK],
    });
    documents.set('/impostor.json', { client_id: clientId, client_name: 'Impostor', redirect_uris: [CALLBACK] });

    const { app } = ctx();
    const asm = (await app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).json();
    t.equal(asm.client_id_metadata_document_supported, true);
    const { verifier, challenge } = pkce();
    const query = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: CALLBACK,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'doc',
    };
    const { page } = await openConsent(query);
    t.equal(page.statusCode, 200);
    t.match(page.body, /Documented agent/);
    const { redirect } = await approve(query, account.key);
    const answer = await exchangeCode(redirect?.searchParams.get('code') ?? '', verifier, clientId);
    t.equal(answer.statusCode, 200);
    t.equal((await mcpStatus(answer.json().access_token)).statusCode, 200);

    const impostor = await openConsent({ ...query, client_id: `${origin}/impostor.json` });
    t.equal(impostor.page.statusCode, 400, 'a document naming another client_id');
    t.notOk(impostor.page.headers.location);
    const elsewhere = await openConsent({ ...query, redirect_uri: 'https://evil.example/cb' });
    t.equal(elsewhere.page.statusCode, 400, 'a redirect URI the document does not list');
    t.notOk(elsewhere.page.headers.location);
  },
);

t.test('registration is rate-limited per client address', async (t) => {
  const { app } = ctx();
  const register = () =>
    app.inject({
      method: 'POST',
      url: '/oauth/register',
      remoteAddress: '203.0.113.9',
      payload: { client_name: 'Flood', redirect_uris: [CALLBACK] },
    });
  const statuses = new Set<number>();
  for (let i = 0; i < 40; i++) statuses.add((await register()).statusCode);
  t.strictSame([...statuses], [201], 'the first 40 of the minute');
  const refused = await register();
  t.equal(refused.statusCode, 429);
  t.equal(refused.json().error, 'temporarily_unavailable');
  t.ok(refused.headers['retry-after']);
});

t.test('no token, code or key in a log line, through a whole grant', async (t) => {
  // An app of its own: this one logs (at info, one line per request), into lines the test reads.
  const lines: string[] = [];
  const logged = await buildTestApp(
    t,
    { PUBLIC_BASE_URL: 'https://imagegen.example' },
    { logger: { level: 'info', stream: { write: (line: string) => lines.push(line) } }, validateResponses: false },
  );
  const { app } = logged;
  const account = await logged.newAccount();
  const registered = await app.inject({
    method: 'POST',
    url: '/oauth/register',
    payload: { redirect_uris: [CALLBACK] },
  });
  const clientId = registered.json().client_id;
  const { verifier, challenge } = pkce();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: CALLBACK,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'log-state',
  });
  const page = await app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
  const post = (url: string, fields: Record<string, string>, cookie?: string) =>
    app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie && { cookie }) },
      payload: new URLSearchParams(fields).toString(),
    });
  const approved = await post(
    '/oauth/authorize',
    { ...Object.fromEntries(query), csrf_token: csrf, api_key: account.key, decision: 'approve' },
    String(page.headers['set-cookie']).split(';')[0],
  );
  const code = new URL(String(approved.headers.location)).searchParams.get('code') ?? '';
  const fields = { client_id: clientId, redirect_uri: CALLBACK };
  const tokens = (
    await post('/oauth/token', { ...fields, grant_type: 'authorization_code', code, code_verifier: verifier })
  ).json();
  await post('/oauth/token', { ...fields, grant_type: 'authorization_code', code, code_verifier: verifier });
  const mcp = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'application/json, text/event-stream' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  });
  t.equal(mcp.statusCode, 401, 'revoked by the code’s replay');
  // Refused (the replay revoked the grant), and logged as such.
  const refused = await post('/oauth/token', {
    client_id: clientId,
    grant_type: 'refresh_token',
    refresh_token: tokens.refresh_token,
  });
  t.equal(refused.json().error, 'invalid_grant');
  await post('/oauth/revoke', { client_id: clientId, token: tokens.refresh_token });
  t.ok(lines.length >= 8, `${lines.length} lines logged`);
  const secrets = [account.key, code, verifier, csrf, tokens.access_token, tokens.refresh_token];
  for (const secret of secrets.filter(Boolean))
    t.notOk(
      lines.some((line) => line.includes(secret)),
      `${secret.slice(0, 5)}… not logged`,
    );
});
