import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AccountEnvelope, LedgerPage } from '../../../schemas/resources.js';
import { toAccountResource, toLedgerEntryResource } from '../../presenters/account.js';
import type { AccountService } from '../../services/account-service.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  apiSuccess,
  PAGE_QUERY_FIELDS,
  problemResponses,
} from '../route-schemas.js';

export interface AccountRoutesOptions {
  accounts: AccountService;
}

const LedgerQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
  },
  { additionalProperties: false },
);

export const accountRoutes: FastifyPluginAsyncTypebox<AccountRoutesOptions> = async (app, { accounts }) => {
  app.get(
    '/account',
    {
      schema: {
        operationId: 'getAccount',
        tags: ['account'],
        summary: 'Balance, the calling key and its limits',
        description:
          'The balance in tokens, which key made the call, and the rate limits and active-task cap that apply to it.',
        security: BEARER_SECURITY,
        response: {
          200: apiSuccess(Type.Ref(AccountEnvelope), 'The account.'),
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request) => {
      const { caller } = request;
      const { account, limits } = await accounts.overview(caller.accountId);
      // A scoped key's own rate limits replace the service's (docs/design.md §3.11).
      const own = caller.scope.rateLimits;
      const keyLimits = {
        ...limits,
        createsPerMin: own.createsPerMin ?? limits.createsPerMin,
        requestsPerMin: own.requestsPerMin ?? limits.requestsPerMin,
      };
      return { data: toAccountResource(account, caller, keyLimits) };
    },
  );

  app.get(
    '/account/ledger',
    {
      schema: {
        operationId: 'listLedger',
        tags: ['account'],
        summary: 'Grants, debits and refunds of the account, newest first',
        description:
          'Every token movement with the balance after it; grants − debits + refunds = balance, always. Cursor paged.',
        security: BEARER_SECURITY,
        querystring: LedgerQuery,
        response: {
          200: apiSuccess(Type.Ref(LedgerPage), 'A page of ledger entries, newest first.'),
          ...problemResponses(AUTHENTICATED_CODES),
        },
      },
    },
    async (request) => {
      const page = await accounts.ledger(request.caller.accountId, {
        limit: request.query.limit ?? 20,
        cursor: request.query.cursor,
      });
      return { data: page.items.map(toLedgerEntryResource), next_cursor: page.nextCursor };
    },
  );
};
