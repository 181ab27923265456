import { randomBytes, timingSafeEqual } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { type AuthorizationRequest, OAuthError, type OAuthService } from '../../services/oauth.js';
import { authorizationErrorPage, consentPage, consentPageSecurityPolicy } from '../oauth-consent-page.js';

export interface OAuthRoutesOptions {
  oauth: OAuthService;
  /** Client registrations and consent submissions per minute per client address. */
  perAddressPerMin: number;
  /** Shared counters for that limit; null: this process's memory. */
  rateLimitRedis: Redis | null;
  redisKeyPrefix: string;
}

type Params = Record<string, string | undefined>;

/** application/x-www-form-urlencoded, each parameter at most once (RFC 6749 section 3.1). */
const FormBody = Type.Record(Type.String(), Type.String());
const OAuthErrorBody = Type.Object({ error: Type.String(), error_description: Type.String() });
const TokenBody = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  refresh_token: Type.String(),
  scope: Type.String(),
});
const CSRF_COOKIE = 'oauth_csrf';
const FORM_BODY_LIMIT = 16 * 1024;

/**
 * OAuth for the MCP server (docs/design.md §3.10, decision 0034): the discovery documents (RFC 9728,
 * RFC 8414), registration (RFC 7591), the consent page, the token and revocation endpoints. They
 * speak OAuth's own error format (`{error, error_description}`), not problem+json, and are left out
 * of the OpenAPI document as /mcp is: their contract is the RFCs'.
 */
export async function oauthRoutes(app: FastifyInstance, options: OAuthRoutesOptions): Promise<void> {
  const { oauth } = options;
  const secureCookie = oauth.issuer.startsWith('https:');

  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT },
    (_request, body, done) => {
      const params = new URLSearchParams(body as string);
      const fields: Record<string, string> = {};
      for (const [name, value] of params) {
        if (Object.hasOwn(fields, name))
          return done(new OAuthError('invalid_request', `The parameter ${name} is sent more than once.`), undefined);
        fields[name] = value;
      }
      done(null, fields);
    },
  );
  app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown }, request, reply) => {
    const oauthError =
      error instanceof OAuthError
        ? error
        : error.statusCode === 429
          ? new OAuthError('temporarily_unavailable', error.message, 429)
          : error.statusCode !== undefined && error.statusCode < 500
            ? new OAuthError('invalid_request', error.message, error.statusCode)
            : null;
    if (!oauthError) {
      request.log.error({ err: error }, 'OAuth endpoint failed');
      return sendOAuthError(reply, new OAuthError('server_error', 'The server failed; try again.', 500));
    }
    return sendOAuthError(reply, oauthError);
  });
  await app.register(rateLimit, {
    global: false,
    ...(options.rateLimitRedis && { redis: options.rateLimitRedis, nameSpace: `${options.redisKeyPrefix}oauth-rl:` }),
    skipOnError: true,
    errorResponseBuilder: (_request, context) =>
      new OAuthError('temporarily_unavailable', `Too many requests from this address; retry in ${context.after}.`, 429),
  });
  const perAddress = { rateLimit: { max: options.perAddressPerMin, timeWindow: 60_000 } };

  const protectedResource = {
    schema: { hide: true, response: { 200: Type.Object({}, { additionalProperties: true }) } },
  };
  app.get('/.well-known/oauth-protected-resource', protectedResource, async () => oauth.protectedResourceMetadata());
  app.get('/.well-known/oauth-protected-resource/mcp', protectedResource, async () =>
    oauth.protectedResourceMetadata(),
  );
  app.get(
    '/.well-known/oauth-authorization-server',
    { schema: { hide: true, response: { 200: Type.Object({}, { additionalProperties: true }) } } },
    async () => oauth.authorizationServerMetadata(),
  );

  app.post(
    '/oauth/register',
    {
      config: perAddress,
      bodyLimit: FORM_BODY_LIMIT,
      schema: {
        hide: true,
        body: Type.Object({}, { additionalProperties: true }),
        response: {
          201: Type.Object({ client_id: Type.String() }, { additionalProperties: true }),
          400: OAuthErrorBody,
        },
      },
    },
    async (request, reply) => {
      noStore(reply);
      return reply.code(201).send(await oauth.registerClient(request.body));
    },
  );

  app.get(
    '/oauth/authorize',
    { schema: { hide: true, querystring: Type.Record(Type.String(), Type.String()) } },
    async (request, reply) => {
      const query = request.query as Params;
      const checked = await clientAndRedirectOrPage(query, reply);
      if (!checked) return reply;
      let authorization: AuthorizationRequest;
      try {
        authorization = oauth.checkAuthorizationRequest(checked, query);
      } catch (error) {
        if (error instanceof OAuthError)
          return redirectWithError(reply, checked.redirectUri, query.state, error, 302, oauth.issuer);
        throw error;
      }
      const csrfToken = randomBytes(32).toString('base64url');
      reply.header('set-cookie', csrfCookie(csrfToken));
      return sendPage(reply, 200, consentPage(authorization, csrfToken), authorization.redirectUri);
    },
  );

  app.post(
    '/oauth/authorize',
    { config: perAddress, schema: { hide: true, body: FormBody } },
    async (request, reply) => {
      const form = request.body as Params;
      const checked = await clientAndRedirectOrPage(form, reply);
      if (!checked) return reply;
      // CSRF: the form's token must be the cookie this origin set with the page (double submit);
      // another site can neither read the cookie nor make the browser send it (SameSite=Strict).
      if (!csrfMatches(request, form.csrf_token)) {
        return sendPage(
          reply,
          403,
          authorizationErrorPage('access_denied', 'The form was not sent from its page; open the link again.'),
          null,
        );
      }
      let authorization: AuthorizationRequest;
      try {
        authorization = oauth.checkAuthorizationRequest(checked, form);
      } catch (error) {
        if (error instanceof OAuthError)
          return redirectWithError(reply, checked.redirectUri, form.state, error, 303, oauth.issuer);
        throw error;
      }
      if (form.decision !== 'approve')
        return redirectWithError(
          reply,
          authorization.redirectUri,
          form.state,
          new OAuthError('access_denied', 'The person declined.'),
          303,
          oauth.issuer,
        );
      const code = await oauth.approve(authorization, (form.api_key ?? '').trim());
      if (!code) {
        const csrfToken = randomBytes(32).toString('base64url');
        reply.header('set-cookie', csrfCookie(csrfToken));
        return sendPage(
          reply,
          401,
          consentPage(authorization, csrfToken, 'That API key is unknown or revoked.'),
          authorization.redirectUri,
        );
      }
      reply.header('set-cookie', `${CSRF_COOKIE}=; Path=/oauth/authorize; Max-Age=0; HttpOnly; SameSite=Strict`);
      return redirectTo(reply, authorization.redirectUri, { code, state: form.state, iss: oauth.issuer }, 303);
    },
  );

  app.post(
    '/oauth/token',
    {
      schema: {
        hide: true,
        body: FormBody,
        response: { 200: TokenBody, 400: OAuthErrorBody, 401: OAuthErrorBody },
      },
    },
    async (request, reply) => {
      noStore(reply);
      const body = request.body as Params;
      if (body.grant_type === 'authorization_code') return oauth.exchangeCode(body);
      if (body.grant_type === 'refresh_token') return oauth.refresh(body);
      throw new OAuthError('unsupported_grant_type', 'grant_type is authorization_code or refresh_token.');
    },
  );

  app.post(
    '/oauth/revoke',
    {
      schema: {
        hide: true,
        body: FormBody,
        response: {
          200: Type.Null({ description: 'Revoked, or no token of this server (RFC 7009 section 2.2).' }),
          400: OAuthErrorBody,
        },
      },
    },
    async (request, reply) => {
      noStore(reply);
      await oauth.revoke(request.body as Params);
      return reply.code(200).send();
    },
  );

  /** The client and its redirect URI, or (an error that may not go to the redirect URI) the error page sent. */
  async function clientAndRedirectOrPage(params: Params, reply: FastifyReply) {
    try {
      return await oauth.clientAndRedirect(params);
    } catch (error) {
      if (!(error instanceof OAuthError)) throw error;
      sendPage(reply, 400, authorizationErrorPage(error.error, error.description), null);
      return null;
    }
  }

  function csrfCookie(token: string): string {
    return `${CSRF_COOKIE}=${token}; Path=/oauth/authorize; Max-Age=1800; HttpOnly; SameSite=Strict${secureCookie ? '; Secure' : ''}`;
  }
}

function csrfMatches(request: FastifyRequest, formToken: string | undefined): boolean {
  const cookie = (request.headers.cookie ?? '')
    .split(';')
    .map((part) => part.trim())
    .find((part) => part.startsWith(`${CSRF_COOKIE}=`))
    ?.slice(CSRF_COOKIE.length + 1);
  if (!cookie || !formToken) return false;
  const a = Buffer.from(cookie);
  const b = Buffer.from(formToken);
  return a.length === b.length && timingSafeEqual(a, b);
}

function noStore(reply: FastifyReply): void {
  reply.header('cache-control', 'no-store');
  reply.header('pragma', 'no-cache');
}

function sendPage(reply: FastifyReply, status: number, html: string, redirectUri: string | null): FastifyReply {
  noStore(reply);
  reply.header('content-security-policy', consentPageSecurityPolicy(redirectUri));
  reply.header('x-frame-options', 'DENY');
  return reply.code(status).type('text/html; charset=utf-8').send(html);
}

function sendOAuthError(reply: FastifyReply, error: OAuthError): FastifyReply {
  noStore(reply);
  return reply
    .code(error.status)
    .type('application/json')
    .send({ error: error.error, error_description: error.description });
}

/**
 * Errors after the redirect URI was checked go back to it (RFC 6749 section 4.1.2.1), with the state
 * and, as every authorization response, the issuer (RFC 9207).
 */
function redirectWithError(
  reply: FastifyReply,
  redirectUri: string,
  state: string | undefined,
  error: OAuthError,
  status: 302 | 303,
  issuer: string,
): FastifyReply {
  const params = { error: error.error, error_description: error.description, state, iss: issuer };
  return redirectTo(reply, redirectUri, params, status);
}

function redirectTo(reply: FastifyReply, redirectUri: string, params: Params, status: 302 | 303): FastifyReply {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  noStore(reply);
  return reply.code(status).header('location', url.href).send();
}
