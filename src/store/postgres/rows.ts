import type { OutputFormat } from '../../../schemas/output-format.js';
import type { TaskRecord, TaskStatus } from '../../core/task.js';
import type { AccountStatus, BudgetPeriod, KeyScope } from '../../core/key-scope.js';
import type {
  Account,
  ApiKeyRecord,
  LedgerEntry,
  LedgerKind,
  MediaRecord,
  MediaSource,
  WebhookDelivery,
  WebhookDeliveryStatus,
} from '../port.js';
import type { WebhookEventType } from '../../../schemas/webhooks.js';

/** Row shapes of the PostgreSQL schema (as pg returns them: timestamptz as Date, json parsed) and their records. */

export interface AccountRow {
  id: string;
  name: string;
  balance: number;
  status?: AccountStatus;
  created_at: Date;
}
export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  models: string[] | null;
  budget_tokens: number | null;
  budget_period: BudgetPeriod | null;
  creates_per_min: number | null;
  requests_per_min: number | null;
  expires_at: Date | null;
}
/** The columns of an API key record, named in every query that reads one. */
export const API_KEY_COLUMNS =
  'id, account_id, name, prefix, created_at, last_used_at, revoked_at, models, budget_tokens, budget_period, ' +
  'creates_per_min, requests_per_min, expires_at';
export const ACCOUNT_COLUMNS = 'id, name, balance, status, created_at';
export interface LedgerRow {
  id: number;
  account_seq: number;
  entry_id: string;
  account_id: string;
  kind: LedgerKind;
  amount: number;
  balance_after: number;
  task_id: string | null;
  note: string | null;
  reference: string | null;
  created_at: Date;
}
export interface TaskRow {
  id: string;
  account_id: string;
  status: TaskStatus;
  model: string;
  prompt: string;
  image_reference: string[];
  aspect_ratio: string;
  resolution: string;
  output_format: OutputFormat;
  output_compression: number | null;
  width: number;
  height: number;
  cost: number;
  webhook_url: string | null;
  end_user_id: string | null;
  seed: number | null;
  key_id: string | null;
  generated: TaskRecord['generated'];
  error_code: string | null;
  error_message: string | null;
  attempt: number;
  deferred_attempts: number;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}
export interface MediaRow {
  id: string;
  account_id: string;
  source: MediaSource;
  content_type: string;
  width: number;
  height: number;
  size_bytes: number;
  sha256: string;
  blob_key: string;
  task_id: string | null;
  created_at: Date;
  expires_at: Date;
}
export interface WebhookDeliveryRow {
  id: string;
  account_id: string;
  task_id: string;
  event_type: WebhookEventType;
  url: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  scheduled_attempts: number;
  manual_attempt: boolean;
  resume_at: Date | null;
  next_attempt_at: Date | null;
  event_at: Date;
  created_at: Date;
}

/** The columns of a task record, named in every query that reads a task. */
export const TASK_COLUMNS =
  'id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height, cost, webhook_url, ' +
  'generated, error_code, error_message, attempt, deferred_attempts, created_at, started_at, completed_at, ' +
  'output_format, output_compression, end_user_id, seed, key_id';

export const toAccount = (r: AccountRow): Account => ({
  id: r.id,
  name: r.name,
  balance: r.balance,
  status: r.status ?? 'active',
  createdAt: r.created_at,
});

export const toApiKey = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  accountId: r.account_id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
  scope: toKeyScope(r),
});

export const toKeyScope = (r: ApiKeyRow): KeyScope => ({
  models: r.models,
  tokenBudget: r.budget_tokens === null ? null : { tokens: Number(r.budget_tokens), period: r.budget_period },
  rateLimits: { createsPerMin: r.creates_per_min, requestsPerMin: r.requests_per_min },
  expiresAt: r.expires_at,
});

export const toLedgerEntry = (r: LedgerRow): LedgerEntry => ({
  id: r.entry_id,
  accountId: r.account_id,
  kind: r.kind,
  amount: r.amount,
  balanceAfter: r.balance_after,
  taskId: r.task_id,
  note: r.note,
  reference: r.reference ?? null,
  createdAt: r.created_at,
});

export const toTask = (r: TaskRow): TaskRecord => ({
  id: r.id,
  accountId: r.account_id,
  status: r.status,
  model: r.model,
  prompt: r.prompt,
  imageReference: r.image_reference,
  parameters: {
    aspect_ratio: r.aspect_ratio,
    resolution: r.resolution,
    output_format: r.output_format,
    output_compression: r.output_compression,
    seed: r.seed,
  },
  width: r.width,
  height: r.height,
  cost: r.cost,
  webhookUrl: r.webhook_url,
  endUserId: r.end_user_id,
  keyId: r.key_id,
  generated: r.generated,
  error: r.error_code ? { code: r.error_code, message: r.error_message ?? '' } : null,
  attempt: r.attempt,
  deferredAttempts: r.deferred_attempts,
  createdAt: r.created_at,
  startedAt: r.started_at,
  completedAt: r.completed_at,
});

/** A task's values in the order of TASK_INSERT's columns. */
export const taskValues = (t: TaskRecord): unknown[] => [
  t.id,
  t.accountId,
  t.status,
  t.model,
  t.prompt,
  JSON.stringify(t.imageReference),
  t.parameters.aspect_ratio,
  t.parameters.resolution,
  t.width,
  t.height,
  t.cost,
  t.webhookUrl,
  JSON.stringify(t.generated),
  t.error?.code ?? null,
  t.error?.message ?? null,
  t.attempt,
  t.deferredAttempts,
  t.createdAt,
  t.startedAt,
  t.completedAt,
  t.parameters.output_format,
  t.parameters.output_compression,
  t.endUserId,
  t.parameters.seed,
  t.keyId,
];

export const toMedia = (r: MediaRow): MediaRecord => ({
  id: r.id,
  accountId: r.account_id,
  source: r.source,
  contentType: r.content_type,
  width: r.width,
  height: r.height,
  sizeBytes: r.size_bytes,
  sha256: r.sha256,
  blobKey: r.blob_key,
  taskId: r.task_id,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

export const mediaValues = (m: MediaRecord): unknown[] => [
  m.id,
  m.accountId,
  m.source,
  m.contentType,
  m.width,
  m.height,
  m.sizeBytes,
  m.sha256,
  m.blobKey,
  m.taskId,
  m.createdAt,
  m.expiresAt,
];

export const toWebhookDelivery = (r: WebhookDeliveryRow): WebhookDelivery => ({
  id: r.id,
  accountId: r.account_id,
  taskId: r.task_id,
  eventType: r.event_type,
  url: r.url,
  status: r.status,
  attempts: r.attempts,
  scheduledAttempts: r.scheduled_attempts,
  manualRetry: r.manual_attempt ? { resumeAt: r.resume_at } : null,
  nextAttemptAt: r.next_attempt_at,
  eventAt: r.event_at,
  createdAt: r.created_at,
});
