import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { AccountEnvelope, LedgerPage } from '../../../schemas/resources.js';
import type { LedgerEntry, Store } from '../../store/port.js';
import {
  AUTHENTICATED_CODES,
  BEARER_SECURITY,
  apiSuccess,
  PAGE_QUERY_FIELDS,
  problemResponses,
} from '../route-schemas.js';

export interface AccountLimits {
  createsPerMin: number;
  requestsPerMin: number;
  maxActiveTasks: number;
}

export interface AccountRoutesOptions {
  store: Pick<Store, 'accounts'>;
  limits: AccountLimits;
}

const LedgerQuery = Type.Object(
  {
    ...PAGE_QUERY_FIELDS,
  },
  { additionalProperties: false },
);

const toLedgerEntryResource = (e: LedgerEntry) => ({
  id: e.id,
  kind: e.kind,
  amount: e.amount,
  balance_after: e.balanceAfter,
  task_id: e.taskId,
  note: e.note,
  created_at: e.createdAt.toISOString(),
});

export const accountRoutes: FastifyPluginAsyncTypebox<AccountRoutesOptions> = async (app, { store, limits }) => {
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
      const account = await store.accounts.getAccount(caller.accountId);
      // The key was found joined to its account a moment ago, and accounts are never deleted.
      if (!account) throw new Error(`account ${caller.accountId} of key ${caller.keyId} is missing`);
      return {
        data: {
          account_id: account.id,
          balance: account.balance,
          key: { key_id: caller.keyId, name: caller.keyName, prefix: caller.keyPrefix },
          limits: {
            creates_per_min: limits.createsPerMin,
            requests_per_min: limits.requestsPerMin,
            max_active_tasks: limits.maxActiveTasks,
          },
        },
      };
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
      const page = await store.accounts.listLedger(request.caller.accountId, {
        limit: request.query.limit ?? 20,
        cursor: request.query.cursor,
      });
      return { data: page.items.map(toLedgerEntryResource), next_cursor: page.nextCursor };
    },
  );
};
