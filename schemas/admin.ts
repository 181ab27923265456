import { Type } from '@sinclair/typebox';
import { StringEnum } from './model-entry.js';
import { MODEL_IDS } from './catalog.js';
import { Cursor, Int32, Nullable, Timestamp, TokenAmount, Uuid } from './primitives.js';
import { KEY_NAME_MAX_LENGTH, LEDGER_NOTE_MAX_LENGTH } from './resources.js';

const PAGE_MAX_ITEMS = 100;

/**
 * The admin API's resources (docs/design.md §3.9): accounts as operators see them, scoped keys,
 * grants, usage rows and the audit log. Shared with the self-service routes (keys and usage).
 */

export const ACCOUNT_NAME_MAX_LENGTH = 200;
export const REFERENCE_MAX_LENGTH = 200;
const NextCursor = Nullable(Cursor('Pass as `cursor` for the next page; null on the last page.'));

export const AdminAccount = Type.Object(
  {
    account_id: Uuid('The account.'),
    name: Type.String({ maxLength: ACCOUNT_NAME_MAX_LENGTH }),
    status: StringEnum(['active', 'suspended'] as const, {
      description: "`suspended`: the account's keys get 403 `account_suspended`; running tasks finish.",
    }),
    balance: TokenAmount({ description: 'Tokens available.' }),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);
export const AdminAccountEnvelope = Type.Object({ data: AdminAccount }, { additionalProperties: false });
export const AdminAccountPage = Type.Object(
  { data: Type.Array(AdminAccount, { maxItems: PAGE_MAX_ITEMS }), next_cursor: NextCursor },
  { additionalProperties: false },
);

const AccountName = Type.String({ minLength: 1, maxLength: ACCOUNT_NAME_MAX_LENGTH, pattern: '\\S' });

export const AccountCreateBody = Type.Object(
  {
    name: AccountName,
    tokens: Type.Optional(TokenAmount({ description: 'Opening grant; 0 when absent.' })),
  },
  { additionalProperties: false },
);

export const AccountPatchBody = Type.Object(
  {
    name: Type.Optional(AccountName),
    status: Type.Optional(StringEnum(['active', 'suspended'] as const)),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const TokenBudgetSchema = Type.Object(
  {
    tokens: TokenAmount({ minimum: 1, description: 'Tokens the key may spend per period.' }),
    period: Type.Unsafe<'day' | 'month' | null>({
      type: ['string', 'null'],
      enum: ['day', 'month', null],
      description: 'UTC calendar day or month; null: over the key’s whole life.',
    }),
  },
  { additionalProperties: false },
);

const RateLimitsSchema = Type.Object(
  {
    creates_per_min: Type.Optional(Int32({ minimum: 1, description: 'Creates per minute; default: the service’s.' })),
    requests_per_min: Type.Optional(
      Int32({ minimum: 1, description: 'Other requests per minute; default: the service’s.' }),
    ),
  },
  { additionalProperties: false },
);

export const KeyCreateBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: KEY_NAME_MAX_LENGTH, pattern: '\\S' }),
    models: Type.Optional(
      Type.Array(StringEnum(MODEL_IDS), {
        minItems: 1,
        maxItems: MODEL_IDS.length,
        uniqueItems: true,
        description: 'The models the key may create tasks of; absent: every model.',
      }),
    ),
    token_budget: Type.Optional(TokenBudgetSchema),
    rate_limits: Type.Optional(RateLimitsSchema),
    expires_at: Type.Optional(Timestamp),
  },
  { additionalProperties: false },
);

export const ApiKeyResource = Type.Object(
  {
    key_id: Uuid('The key.'),
    account_id: Uuid('Its account.'),
    name: Type.String({ maxLength: KEY_NAME_MAX_LENGTH }),
    prefix: Type.String({ maxLength: 12, pattern: '^igk_[A-Za-z0-9_-]*$', description: 'Never the key.' }),
    models: Nullable(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100 })),
    token_budget: Nullable(TokenBudgetSchema),
    budget_spent: TokenAmount({
      description: 'What the key’s tasks of the current period cost (refunded ones not counted).',
    }),
    rate_limits: Type.Object(
      { creates_per_min: Nullable(Int32()), requests_per_min: Nullable(Int32()) },
      { additionalProperties: false, description: 'null: the service’s default.' },
    ),
    expires_at: Nullable(Timestamp),
    created_at: Timestamp,
    last_used_at: Nullable(Timestamp),
    revoked_at: Nullable(Timestamp),
  },
  { additionalProperties: false },
);
export const ApiKeyList = Type.Object(
  { data: Type.Array(ApiKeyResource, { maxItems: 1000 }) },
  { additionalProperties: false },
);
export const CreatedKeyEnvelope = Type.Object(
  {
    data: Type.Object(
      {
        ...ApiKeyResource.properties,
        key: Type.String({ maxLength: 100, description: 'The key itself: shown this once, stored only as a hash.' }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const GrantBody = Type.Object(
  {
    tokens: Type.Integer({
      format: 'int64',
      minimum: -Number.MAX_SAFE_INTEGER,
      maximum: Number.MAX_SAFE_INTEGER,
      not: { const: 0 },
      description: 'Tokens to add; negative: an adjustment, which never takes the balance below zero.',
    }),
    note: Type.String({ minLength: 1, maxLength: LEDGER_NOTE_MAX_LENGTH, pattern: '\\S' }),
    reference: Type.Optional(Type.String({ minLength: 1, maxLength: REFERENCE_MAX_LENGTH })),
  },
  { additionalProperties: false },
);

export const GrantEnvelope = Type.Object(
  {
    data: Type.Object(
      {
        entry_id: Uuid('The ledger entry.'),
        kind: StringEnum(['grant', 'debit'] as const, { description: 'An adjustment is a debit without a task.' }),
        amount: TokenAmount({ minimum: 1 }),
        balance_after: TokenAmount(),
        note: Nullable(Type.String({ maxLength: LEDGER_NOTE_MAX_LENGTH })),
        reference: Nullable(Type.String({ maxLength: REFERENCE_MAX_LENGTH })),
        created_at: Timestamp,
        account: AdminAccount,
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const UsageRowSchema = Type.Object(
  {
    day: Type.Optional(Type.String({ format: 'date', maxLength: 10 })),
    model: Type.Optional(Type.String({ maxLength: 100 })),
    account_id: Type.Optional(Uuid('The account.')),
    key_id: Type.Optional(Nullable(Uuid('The key; null for tasks made without one.'))),
    tasks: TokenAmount(),
    images: TokenAmount(),
    tokens_charged: TokenAmount(),
    tokens_refunded: TokenAmount(),
    failed: TokenAmount(),
    canceled: TokenAmount(),
  },
  { additionalProperties: false },
);
export const UsageReport = Type.Object(
  { data: Type.Array(UsageRowSchema, { maxItems: 1_000_000 }) },
  { additionalProperties: false },
);

export const UsageQueryFields = {
  from: Type.String({ format: 'date', maxLength: 10, description: 'First day (UTC), inclusive.' }),
  to: Type.String({ format: 'date', maxLength: 10, description: 'Last day (UTC), inclusive; at most 366 days.' }),
  format: Type.Optional(StringEnum(['json', 'csv'] as const, { default: 'json' })),
};

export const AuditEntrySchema = Type.Object(
  {
    id: Uuid('The entry; newest first.'),
    admin_key_id: Nullable(Type.String({ maxLength: 64, description: 'null: no admin key was recognised.' })),
    action: Type.String({ maxLength: 300, description: 'Method and route.' }),
    target: Nullable(Type.String({ maxLength: 64 })),
    status: Int32({ description: 'The HTTP status answered.' }),
    request_id: Type.String({ maxLength: 128 }),
    client_address: Type.String({ maxLength: 64 }),
    created_at: Timestamp,
  },
  { additionalProperties: false },
);
export const AuditPage = Type.Object(
  { data: Type.Array(AuditEntrySchema, { maxItems: PAGE_MAX_ITEMS }), next_cursor: NextCursor },
  { additionalProperties: false },
);
