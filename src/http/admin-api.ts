import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  AccountCreateBody,
  AccountPatchBody,
  AdminAccountEnvelope,
  AdminAccountPage,
  ApiKeyList,
  AuditPage,
  CreatedKeyEnvelope,
  GrantBody,
  GrantEnvelope,
  KeyCreateBody,
  UsageQueryFields,
  UsageReport,
} from '../../schemas/admin.js';
import { LedgerPage } from '../../schemas/resources.js';
import { UuidInput } from '../../schemas/primitives.js';
import { USAGE_GROUPS, usageCsv, type UsageGroup, type UsageRow } from '../core/admin.js';
import { DomainError } from '../core/errors.js';
import { toLedgerEntryResource } from '../presenters/account.js';
import {
  toAdminAccountResource,
  toApiKeyResource,
  toAuditEntryResource,
  toGrantResource,
} from '../presenters/admin.js';
import type { AdminCaller } from '../services/admin-keys.js';
import { newIdAt } from '../ids.js';
import type { AppServices } from './app-services.js';
import type { AuthFailureLimiter } from './plugins/auth.js';
import {
  apiEmpty,
  apiSuccess,
  canonicalId,
  JSON_BODY_CODES,
  PAGE_QUERY_FIELDS,
  problemResponses,
} from './route-schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    admin: AdminCaller | null;
  }
}

export interface AdminApiOptions {
  services: AppServices;
  /** The failed-authentication budget of the authenticated scope this API sits in: one per client address for every face. */
  failureLimiter: AuthFailureLimiter;
}

const ADMIN_SECURITY = [{ adminAuth: [] }];
const ADMIN_CODES = ['invalid_request', 'unauthorized', 'rate_limited', 'internal_error', 'unavailable'] as const;
const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

const AccountParams = Type.Object({ account_id: UuidInput('The account.') }, { additionalProperties: false });
const KeyParams = Type.Object({ key_id: UuidInput('The key.') }, { additionalProperties: false });
const PageQuery = Type.Object({ ...PAGE_QUERY_FIELDS }, { additionalProperties: false });
const AccountListQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
    status: Type.Optional(Type.Unsafe<'active' | 'suspended'>({ type: 'string', enum: ['active', 'suspended'] })),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Part of the name, any case.' })),
  },
  { additionalProperties: false },
);
export const AdminUsageQuery = Type.Object(
  {
    ...UsageQueryFields,
    group_by: Type.Optional(
      Type.String({ maxLength: 40, pattern: '^[a-z,]*$', description: `Comma list of ${USAGE_GROUPS.join(', ')}.` }),
    ),
    account_id: Type.Optional(UuidInput('Only this account.')),
  },
  { additionalProperties: false },
);
const GrantHeaders = Type.Object({
  'idempotency-key': Type.String({
    minLength: 1,
    maxLength: IDEMPOTENCY_KEY_MAX_LENGTH,
    description: 'Required: a grant retried with the same key is applied once.',
  }),
});

/** A usage report as the query asked: JSON rows, or CSV whose cells no spreadsheet runs. */
export function sendUsage(
  reply: FastifyReply,
  format: 'json' | 'csv' | undefined,
  report: { rows: UsageRow[]; groups: UsageGroup[] },
) {
  if (format === 'csv')
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="usage.csv"')
      .send(usageCsv(report.rows, report.groups));
  return { data: report.rows };
}

/** The report's 200: JSON rows, or (`format=csv`) CSV with a header line and a row per group, cells never formulas. */
export const USAGE_RESPONSE = {
  description: 'The rows, in the order of their groups: JSON, or CSV with `format=csv`.',
  headers: apiSuccess(UsageReport, '').headers,
  content: {
    'application/json': { schema: UsageReport },
    'text/csv': { schema: { type: 'string', maxLength: 100_000_000 } },
  },
};

/**
 * /admin/v1 (docs/design.md §3.9): its own Bearer keys (admin keys only; an account key is 401,
 * as an admin key is on the account faces), under the failed-authentication budget of the account
 * faces; every request, refusals included, appended to the audit log before its answer leaves;
 * `Cache-Control: no-store`; no CORS (no preflight is answered, no route sends CORS headers).
 */
export const adminApi: FastifyPluginAsyncTypebox<AdminApiOptions> = async (scope, { services, failureLimiter }) => {
  const { admin, adminKeys, now } = services;
  scope.decorateRequest('admin', null);
  // Inside the authenticated scope (its rate limits, its failure budget), whose account-key
  // authentication leaves these routes to the admin key's below.
  scope.addHook('onRoute', (route) => {
    route.config = { ...(route.config as object), cors: false, auth: 'admin' } as typeof route.config;
  });
  // A preflight to /admin gets no CORS answer (the wildcard OPTIONS route of @fastify/cors would).
  scope.options('/*', { schema: { hide: true } }, async (_request, reply) => reply.callNotFound());

  scope.addHook('onRequest', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    const match = /^Bearer +(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match) throw new DomainError('unauthorized', 'Send Authorization: Bearer <admin key>.');
    const caller = await adminKeys.authenticate(match[1], now());
    if (caller) {
      request.admin = caller;
      return;
    }
    await failureLimiter.assertAllowed(request, reply);
    await failureLimiter.recordFailure(request);
    throw new DomainError('unauthorized', 'The admin key is unknown or revoked.');
  });

  // Written before the answer leaves, so that no admin request is answered unrecorded.
  scope.addHook('onSend', async (request, reply, payload) => {
    try {
      await admin.appendAudit(auditEntryOf(request, reply.statusCode, now()));
    } catch (err) {
      request.log.error({ err }, 'could not append to the admin audit log');
    }
    return payload;
  });

  scope.post(
    '/accounts',
    {
      schema: {
        operationId: 'adminCreateAccount',
        tags: ['admin'],
        summary: 'Create an account, with an opening grant',
        description:
          'A new account with `tokens` as its opening grant (0 for none); its keys are made with adminCreateKey.',
        security: ADMIN_SECURITY,
        body: AccountCreateBody,
        response: {
          201: apiSuccess(AdminAccountEnvelope, 'The account.'),
          ...problemResponses([...ADMIN_CODES, ...JSON_BODY_CODES]),
        },
      },
    },
    async (request, reply) => {
      const account = await admin.createAccount(request.body.name, request.body.tokens ?? 0);
      return reply.code(201).send({ data: toAdminAccountResource(account) });
    },
  );

  scope.get(
    '/accounts',
    {
      schema: {
        operationId: 'adminListAccounts',
        tags: ['admin'],
        summary: 'Accounts, newest first; filter by status, search by name',
        description:
          'Cursor paged; `status` filters, `q` matches part of the name in any case (wildcards are taken literally).',
        security: ADMIN_SECURITY,
        querystring: AccountListQuery,
        response: { 200: apiSuccess(AdminAccountPage, 'A page of accounts.'), ...problemResponses(ADMIN_CODES) },
      },
    },
    async (request) => {
      const { limit = 20, cursor, status, q } = request.query;
      const page = await admin.listAccounts({
        limit,
        ...(cursor && { cursor }),
        ...(status && { status }),
        ...(q && { q }),
      });
      return { data: page.items.map(toAdminAccountResource), next_cursor: page.nextCursor };
    },
  );

  scope.get(
    '/accounts/:account_id',
    {
      schema: {
        operationId: 'adminGetAccount',
        tags: ['admin'],
        summary: 'One account',
        description: 'The account with its balance and status.',
        security: ADMIN_SECURITY,
        params: AccountParams,
        response: {
          200: apiSuccess(AdminAccountEnvelope, 'The account.'),
          ...problemResponses([...ADMIN_CODES, 'not_found']),
        },
      },
    },
    async (request) => ({
      data: toAdminAccountResource(await admin.account(canonicalId(request.params.account_id))),
    }),
  );

  scope.patch(
    '/accounts/:account_id',
    {
      schema: {
        operationId: 'adminUpdateAccount',
        tags: ['admin'],
        summary: 'Rename, suspend or resume an account',
        description: "A suspended account's keys get 403 `account_suspended` on every face; running tasks finish.",
        security: ADMIN_SECURITY,
        params: AccountParams,
        body: AccountPatchBody,
        response: {
          200: apiSuccess(AdminAccountEnvelope, 'The account.'),
          ...problemResponses([...ADMIN_CODES, ...JSON_BODY_CODES, 'not_found']),
        },
      },
    },
    async (request) => {
      const { name, status } = request.body;
      const account = await admin.updateAccount(canonicalId(request.params.account_id), {
        ...(name !== undefined && { name }),
        ...(status !== undefined && { status }),
      });
      return { data: toAdminAccountResource(account) };
    },
  );

  scope.post(
    '/accounts/:account_id/keys',
    {
      schema: {
        operationId: 'adminCreateKey',
        tags: ['admin'],
        summary: 'Create a key of the account, with its scope; the key is shown once',
        description:
          'The key is in this answer only, never again; its scope (models, token budget, rate limits, expiry) is fixed for its life.',
        security: ADMIN_SECURITY,
        params: AccountParams,
        body: KeyCreateBody,
        response: {
          201: apiSuccess(CreatedKeyEnvelope, 'The key, shown this once, and its record.'),
          ...problemResponses([...ADMIN_CODES, ...JSON_BODY_CODES, 'not_found']),
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const expiresAt = body.expires_at === undefined ? null : new Date(body.expires_at);
      const issued = await admin.createKey(canonicalId(request.params.account_id), body.name, {
        models: body.models ?? null,
        tokenBudget: body.token_budget ?? null,
        rateLimits: {
          createsPerMin: body.rate_limits?.creates_per_min ?? null,
          requestsPerMin: body.rate_limits?.requests_per_min ?? null,
        },
        expiresAt,
      });
      return reply.code(201).send({ data: { ...toApiKeyResource(issued.record, 0), key: issued.key } });
    },
  );

  scope.get(
    '/accounts/:account_id/keys',
    {
      schema: {
        operationId: 'adminListKeys',
        tags: ['admin'],
        summary: "The account's keys, with their scopes and spend in the current period",
        description: 'Never a secret: prefixes, scopes, spend in the current budget period, last use and revocation.',
        security: ADMIN_SECURITY,
        params: AccountParams,
        response: {
          200: apiSuccess(ApiKeyList, 'The keys (never their secrets).'),
          ...problemResponses([...ADMIN_CODES, 'not_found']),
        },
      },
    },
    async (request) => {
      const keys = await admin.keys(canonicalId(request.params.account_id));
      return { data: keys.map(({ key, spent }) => toApiKeyResource(key, spent)) };
    },
  );

  scope.delete(
    '/keys/:key_id',
    {
      schema: {
        operationId: 'adminRevokeKey',
        tags: ['admin'],
        summary: 'Revoke a key (refused within a second on every process)',
        description: 'Requests with the key are refused at once on this process and within a second on the others.',
        security: ADMIN_SECURITY,
        params: KeyParams,
        response: { 204: apiEmpty('Revoked.'), ...problemResponses([...ADMIN_CODES, 'not_found']) },
      },
    },
    async (request, reply) => {
      await admin.revokeKey(canonicalId(request.params.key_id));
      return reply.code(204).send();
    },
  );

  scope.post(
    '/accounts/:account_id/grants',
    {
      schema: {
        operationId: 'adminGrant',
        tags: ['admin'],
        summary: 'Grant tokens, or adjust (negative) without going below zero; Idempotency-Key required',
        description:
          'Positive `tokens` grants, negative adjusts (a debit without a task); an adjustment never takes the balance below zero (409). The same Idempotency-Key applies once.',
        security: ADMIN_SECURITY,
        params: AccountParams,
        headers: GrantHeaders,
        body: GrantBody,
        response: {
          201: apiSuccess(GrantEnvelope, 'The ledger entry and the account after it (the first one, on a retry).'),
          ...problemResponses([
            ...ADMIN_CODES,
            ...JSON_BODY_CODES,
            'not_found',
            'invalid_state',
            'idempotency_key_reused',
          ]),
        },
      },
    },
    async (request, reply) => {
      const { entry, account } = await admin.grant(canonicalId(request.params.account_id), {
        tokens: request.body.tokens,
        note: request.body.note,
        reference: request.body.reference ?? null,
        idempotencyKey: request.headers['idempotency-key'],
      });
      return reply.code(201).send({ data: toGrantResource(entry, account) });
    },
  );

  scope.get(
    '/accounts/:account_id/ledger',
    {
      schema: {
        operationId: 'adminListLedger',
        tags: ['admin'],
        summary: "The account's ledger, newest first",
        description: 'Grants, debits and refunds with the balance after each, cursor paged.',
        security: ADMIN_SECURITY,
        params: AccountParams,
        querystring: PageQuery,
        response: {
          200: apiSuccess(Type.Ref(LedgerPage), 'A page of entries.'),
          ...problemResponses([...ADMIN_CODES, 'not_found']),
        },
      },
    },
    async (request) => {
      const { limit = 20, cursor } = request.query;
      const page = await admin.ledger(canonicalId(request.params.account_id), { limit, ...(cursor && { cursor }) });
      return { data: page.items.map(toLedgerEntryResource), next_cursor: page.nextCursor };
    },
  );

  scope.get(
    '/usage',
    {
      schema: {
        operationId: 'adminUsage',
        tags: ['admin'],
        summary: 'Usage from the tasks, grouped by day, model, account and/or key; JSON or CSV',
        description:
          'Counted from the tasks (created, completed, failed, canceled; tokens charged and refunded) between `from` and `to` (UTC, at most 366 days).',
        security: ADMIN_SECURITY,
        querystring: AdminUsageQuery,
        response: {
          200: USAGE_RESPONSE,
          ...problemResponses(ADMIN_CODES),
        },
      },
    },
    async (request, reply) => {
      const { from, to, group_by: groupBy, account_id: accountId, format } = request.query;
      const report = await admin.usage({
        from,
        to,
        ...(groupBy !== undefined && { groupBy }),
        ...(accountId !== undefined && { accountId: canonicalId(accountId) }),
      });
      return sendUsage(reply, format, report);
    },
  );

  scope.get(
    '/audit-log',
    {
      schema: {
        operationId: 'adminAuditLog',
        tags: ['admin'],
        summary: 'Every admin request, refusals included, newest first',
        description:
          'Append-only: the admin key, the action, the target, the status, the request id and the client address of every admin request.',
        security: ADMIN_SECURITY,
        querystring: PageQuery,
        response: { 200: apiSuccess(AuditPage, 'A page of entries.'), ...problemResponses(ADMIN_CODES) },
      },
    },
    async (request) => {
      const { limit = 20, cursor } = request.query;
      const page = await admin.audit({ limit, ...(cursor && { cursor }) });
      return { data: page.items.map(toAuditEntryResource), next_cursor: page.nextCursor };
    },
  );
};

function auditEntryOf(request: FastifyRequest, statusCode: number, at: Date) {
  const params = (request.params ?? {}) as Record<string, unknown>;
  const target = params.account_id ?? params.key_id;
  return {
    id: newIdAt(at),
    adminKeyId: request.admin?.adminKeyId ?? null,
    action: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`.slice(0, 300),
    target: typeof target === 'string' ? target.slice(0, 64).toLowerCase() : null,
    statusCode,
    requestId: request.id,
    clientAddress: request.ip,
    createdAt: at,
  };
}
