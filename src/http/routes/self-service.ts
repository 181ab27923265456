import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiKeyList, UsageQueryFields } from '../../../schemas/admin.js';
import { toApiKeyResource } from '../../presenters/admin.js';
import { OWN_USAGE_GROUPS, type AdminService } from '../../services/admin-service.js';
import { sendUsage, USAGE_RESPONSE } from '../admin-api.js';
import { AUTHENTICATED_CODES, BEARER_SECURITY, apiSuccess, problemResponses } from '../route-schemas.js';

export interface SelfServiceRoutesOptions {
  admin: AdminService;
}

const OwnUsageQuery = Type.Object(
  {
    ...UsageQueryFields,
    group_by: Type.Optional(
      Type.String({
        maxLength: 40,
        pattern: '^[a-z,]*$',
        description: `Comma list of ${OWN_USAGE_GROUPS.join(', ')}.`,
      }),
    ),
  },
  { additionalProperties: false },
);

/** The caller's own account as its operators see it (docs/design.md §3.9): its keys and its usage. */
export const selfServiceRoutes: FastifyPluginAsyncTypebox<SelfServiceRoutesOptions> = async (app, { admin }) => {
  app.get(
    '/keys',
    {
      schema: {
        operationId: 'listOwnKeys',
        tags: ['account'],
        summary: "The account's keys, with their scopes and spend (never their secrets)",
        description:
          'Each key of the account: prefix, name, models, token budget and its spend in the current period, rate limits, expiry, last use.',
        security: BEARER_SECURITY,
        response: { 200: apiSuccess(ApiKeyList, 'The keys.'), ...problemResponses(AUTHENTICATED_CODES) },
      },
    },
    async (request) => {
      const keys = await admin.keys(request.caller.accountId);
      return { data: keys.map(({ key, spent }) => toApiKeyResource(key, spent)) };
    },
  );

  app.get(
    '/usage',
    {
      schema: {
        operationId: 'getOwnUsage',
        tags: ['account'],
        summary: "The account's usage, grouped by day, model and/or key; JSON or CSV",
        description:
          'Counted from the tasks between `from` and `to` (UTC, at most 366 days): tasks by outcome, tokens charged and refunded.',
        security: BEARER_SECURITY,
        querystring: OwnUsageQuery,
        response: {
          200: USAGE_RESPONSE,
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request, reply) => {
      const { from, to, group_by: groupBy, format } = request.query;
      const report = await admin.usage(
        { from, to, accountId: request.caller.accountId, ...(groupBy !== undefined && { groupBy }) },
        OWN_USAGE_GROUPS,
      );
      return sendUsage(reply, format, report);
    },
  );
};
