import type { OutputFormat } from '../../../schemas/output-format.js';
import type { TaskRecord, TaskStatus } from '../../core/task.js';
import type { AccountStatus, BudgetPeriod, KeyScope } from '../../core/key-scope.js';
import type { WebhookEventType } from '../../../schemas/webhooks.js';
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

/** Row shapes of the embedded schema and their mapping to domain records. */

export interface AccountRow {
  id: string;
  name: string;
  balance: number;
  status?: AccountStatus;
  created_at: number;
}
export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  hash: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  models: string | null;
  budget_tokens: number | null;
  budget_period: BudgetPeriod | null;
  creates_per_min: number | null;
  requests_per_min: number | null;
  expires_at: number | null;
}
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
  created_at: number;
}
export interface TaskRow {
  id: string;
  account_id: string;
  status: TaskStatus;
  model: string;
  prompt: string;
  image_reference: string;
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
  generated: string;
  error_code: string | null;
  error_message: string | null;
  attempt: number;
  deferred_attempts: number;
  lease_expires_at: number | null;
  run_after: number;
  created_at: number;
  started_at: number | null;
  completed_at: number | null;
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
  created_at: number;
  expires_at: number;
}

/** The columns of a task that make its record (toTask): all but the queue's own lease_expires_at and run_after. */
export type TaskRecordRow = Omit<TaskRow, 'lease_expires_at' | 'run_after'>;

/** The columns of a task that make its record, named in every query that reads a task. */
export const TASK_COLUMNS = [
  'id',
  'account_id',
  'status',
  'model',
  'prompt',
  'image_reference',
  'aspect_ratio',
  'resolution',
  'width',
  'height',
  'cost',
  'webhook_url',
  'generated',
  'error_code',
  'error_message',
  'attempt',
  'created_at',
  'started_at',
  'completed_at',
  'deferred_attempts',
  'output_format',
  'output_compression',
  'end_user_id',
  'seed',
  'key_id',
] as const satisfies readonly (keyof TaskRecordRow)[];

export const dateOrNull = (ms: number | null) => (ms === null ? null : new Date(ms));
export const msOrNull = (d: Date | null) => (d === null ? null : d.getTime());

export const toAccount = (r: AccountRow): Account => ({
  id: r.id,
  name: r.name,
  balance: r.balance,
  status: r.status ?? 'active',
  createdAt: new Date(r.created_at),
});

export const toApiKey = (r: ApiKeyRow): ApiKeyRecord => ({
  id: r.id,
  accountId: r.account_id,
  name: r.name,
  prefix: r.prefix,
  createdAt: new Date(r.created_at),
  lastUsedAt: dateOrNull(r.last_used_at),
  revokedAt: dateOrNull(r.revoked_at),
  scope: toKeyScope(r),
});

export const toKeyScope = (r: ApiKeyRow): KeyScope => ({
  models: r.models === null ? null : JSON.parse(r.models),
  tokenBudget: r.budget_tokens === null ? null : { tokens: r.budget_tokens, period: r.budget_period },
  rateLimits: { createsPerMin: r.creates_per_min, requestsPerMin: r.requests_per_min },
  expiresAt: dateOrNull(r.expires_at),
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
  createdAt: new Date(r.created_at),
});

export const toTask = (r: TaskRecordRow): TaskRecord => ({
  id: r.id,
  accountId: r.account_id,
  status: r.status,
  model: r.model,
  prompt: r.prompt,
  imageReference: JSON.parse(r.image_reference),
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
  generated: JSON.parse(r.generated),
  error: r.error_code ? { code: r.error_code, message: r.error_message ?? '' } : null,
  attempt: r.attempt,
  deferredAttempts: r.deferred_attempts,
  createdAt: new Date(r.created_at),
  startedAt: dateOrNull(r.started_at),
  completedAt: dateOrNull(r.completed_at),
});

export const taskValues = (t: TaskRecord): TaskRow => ({
  id: t.id,
  account_id: t.accountId,
  status: t.status,
  model: t.model,
  prompt: t.prompt,
  image_reference: JSON.stringify(t.imageReference),
  aspect_ratio: t.parameters.aspect_ratio,
  resolution: t.parameters.resolution,
  output_format: t.parameters.output_format,
  output_compression: t.parameters.output_compression,
  width: t.width,
  height: t.height,
  cost: t.cost,
  webhook_url: t.webhookUrl,
  end_user_id: t.endUserId,
  seed: t.parameters.seed,
  key_id: t.keyId,
  generated: JSON.stringify(t.generated),
  error_code: t.error?.code ?? null,
  error_message: t.error?.message ?? null,
  attempt: t.attempt,
  deferred_attempts: t.deferredAttempts,
  lease_expires_at: null,
  // A new task may run from its creation, as on PostgreSQL.
  run_after: t.createdAt.getTime(),
  created_at: t.createdAt.getTime(),
  started_at: msOrNull(t.startedAt),
  completed_at: msOrNull(t.completedAt),
});

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
  createdAt: new Date(r.created_at),
  expiresAt: new Date(r.expires_at),
});

export const fromMedia = (m: MediaRecord): MediaRow => ({
  id: m.id,
  account_id: m.accountId,
  source: m.source,
  content_type: m.contentType,
  width: m.width,
  height: m.height,
  size_bytes: m.sizeBytes,
  sha256: m.sha256,
  blob_key: m.blobKey,
  task_id: m.taskId,
  created_at: m.createdAt.getTime(),
  expires_at: m.expiresAt.getTime(),
});

export interface WebhookDeliveryRow {
  id: string;
  account_id: string;
  task_id: string;
  event_type: WebhookEventType;
  url: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  scheduled_attempts: number;
  manual_attempt: number;
  resume_at: number | null;
  next_attempt_at: number | null;
  event_at: number;
  created_at: number;
}

export const toWebhookDelivery = (r: WebhookDeliveryRow): WebhookDelivery => ({
  id: r.id,
  accountId: r.account_id,
  taskId: r.task_id,
  eventType: r.event_type,
  url: r.url,
  status: r.status,
  attempts: r.attempts,
  scheduledAttempts: r.scheduled_attempts,
  manualRetry: r.manual_attempt ? { resumeAt: r.resume_at === null ? null : new Date(r.resume_at) } : null,
  nextAttemptAt: r.next_attempt_at === null ? null : new Date(r.next_attempt_at),
  eventAt: new Date(r.event_at),
  createdAt: new Date(r.created_at),
});
