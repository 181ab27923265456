import type { WebhookReplayBudget } from '../core/webhook-replay-budget.js';
import type { WebhookDeliveryStatus } from '../core/webhook-retry-schedule.js';
import type { LedgerKind } from '../core/ledger.js';
import type { WebhookEventType } from '../../schemas/webhooks.js';
import type { BackendLimitSettings, BackendLimitState, UpstreamOutcome } from '../core/backend-capacity.js';
import type { TaskRecord, TaskStatus } from '../core/task.js';
import type { AccountStatus, KeyScope } from '../core/key-scope.js';
import type { AdminAuditEntry, AdminKeyRecord, UsageQuery, UsageRow } from '../core/admin.js';

/**
 * The persistence port: one interface per aggregate, gathered by `Store` (at the end). Every
 * method is async so that the PostgreSQL adapter can implement it without changing callers; every
 * multi-row change is one transaction inside the adapter.
 */

export interface Account {
  id: string;
  name: string;
  balance: number;
  status: AccountStatus;
  createdAt: Date;
}

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  name: string;
  /** The first characters of the key, safe to show; identifies it in listings. */
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  scope: KeyScope;
}

export type { LedgerKind };

export interface LedgerEntry {
  id: string;
  accountId: string;
  kind: LedgerKind;
  /** Always positive; the kind says which way it moved the balance. */
  amount: number;
  balanceAfter: number;
  taskId: string | null;
  note: string | null;
  /** The operator's reference of a grant or adjustment (an invoice, a ticket), else null. */
  reference: string | null;
  createdAt: Date;
}

/** A ledger row to write (both adapters' insert takes these): the entry id and its position are the adapter's. */
export interface NewLedgerEntry {
  kind: LedgerKind;
  amount: number;
  balanceAfter: number;
  taskId: string | null;
  note: string | null;
  at: Date;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface TaskListQuery {
  limit: number;
  /** Opaque to callers: the adapter's own keyset position. */
  cursor?: string;
  status?: TaskStatus;
  model?: string;
  createdAfter?: Date;
  createdBefore?: Date;
}

export interface AccountStore {
  /** Creates the account and, when initialTokens > 0, its opening grant. */
  createAccount(input: { id: string; name: string; initialTokens: number; now: Date }): Promise<Account>;
  getAccount(accountId: string): Promise<Account | null>;
  countAccounts(): Promise<number>;
  grantTokens(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<Account>;
  listLedger(accountId: string, query: { limit: number; cursor?: string }): Promise<Page<LedgerEntry>>;
  /** Sums of the ledger by kind, for the invariant grants − debits + refunds = balance. */
  ledgerTotals(accountId: string): Promise<Record<LedgerKind, number>>;
  /** Accounts, newest first; `q` matches a part of the name (case-insensitive). */
  listAccounts(query: AccountListQuery): Promise<Page<Account>>;
  /** Renames, suspends or resumes; null when there is no such account. */
  updateAccount(accountId: string, change: { name?: string; status?: AccountStatus }): Promise<Account | null>;
  /**
   * A grant (amount > 0) or an adjustment (amount < 0, a debit without a task) under an
   * Idempotency-Key, in one transaction: a key used before for this account returns its entry
   * (`replayed`), applied once; an adjustment that would take the balance below zero throws
   * `insufficient_tokens` and changes nothing; a missing account throws `not_found`.
   */
  adjustBalance(input: BalanceAdjustment): Promise<{ entry: LedgerEntry; account: Account; replayed: boolean }>;
}

export interface AccountListQuery {
  limit: number;
  cursor?: string;
  status?: AccountStatus;
  q?: string;
}

export interface BalanceAdjustment {
  accountId: string;
  /** Signed: a grant adds, an adjustment (negative) takes away. Never 0. */
  amount: number;
  note: string;
  reference: string | null;
  idempotencyKey: string;
  now: Date;
}

/** A new API key: only its hash is stored; the prefix is what lists show of it. */
export interface ApiKeyInsert {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  hash: string;
  now: Date;
  /** Absent: unscoped. */
  scope?: KeyScope;
}

export interface ApiKeyStore {
  insertApiKey(input: ApiKeyInsert): Promise<ApiKeyRecord>;
  getApiKey(keyId: string): Promise<ApiKeyRecord | null>;
  /**
   * What the key's tasks created at or after `since` cost, refunded (FAILED, CANCELED) ones not
   * counted: the key's spend in a budget period.
   */
  keySpentSince(keyId: string, since: Date): Promise<number>;
  /** The unrevoked key with this hash and its account, or null. */
  findActiveApiKey(hash: string): Promise<{ key: ApiKeyRecord; account: Account } | null>;
  listApiKeys(accountId?: string): Promise<ApiKeyRecord[]>;
  /** Revokes by key id or prefix; false when nothing matched. */
  revokeApiKey(idOrPrefix: string, now: Date): Promise<boolean>;
  markApiKeyUsed(keyId: string, now: Date): Promise<void>;
}

/**
 * An OAuth client of the MCP server (docs/design.md §3.10): registered (RFC 7591), its metadata as the
 * service accepted it (redirect_uris, client_name, …). Clients known by a metadata document URL are
 * not stored: their document is read when they ask.
 */
export interface OAuthClientRecord {
  clientId: string;
  metadata: Record<string, unknown>;
  createdAt: Date;
}

/**
 * What a person granted a client: on behalf of an account, through one of its API keys, for one
 * resource. A code and every token issued from it (refreshes included) share `familyId`, so that
 * one replay revokes them all.
 */
export interface OAuthGrant {
  familyId: string;
  clientId: string;
  accountId: string;
  keyId: string;
  resource: string;
  scope: string;
}

/** An authorization code: only its hash is stored. */
export interface OAuthCodeRecord extends OAuthGrant {
  hash: string;
  redirectUri: string;
  codeChallenge: string;
  expiresAt: Date;
  createdAt: Date;
  /** When it was exchanged; a code is taken once. */
  usedAt: Date | null;
}

/** An access or refresh token: only its hash is stored. */
export interface OAuthTokenRecord extends OAuthGrant {
  hash: string;
  kind: 'access' | 'refresh';
  expiresAt: Date;
  createdAt: Date;
  /** A refresh token's rotation: it is used once. */
  usedAt: Date | null;
  revokedAt: Date | null;
}

export type OAuthTokenInsert = Omit<OAuthTokenRecord, 'usedAt' | 'revokedAt'>;

export interface OAuthStore {
  insertOAuthClient(client: OAuthClientRecord): Promise<void>;
  findOAuthClient(clientId: string): Promise<OAuthClientRecord | null>;
  insertAuthorizationCode(code: Omit<OAuthCodeRecord, 'usedAt'>): Promise<void>;
  /**
   * Marks the code used and returns it as it was before this call (usedAt set: it had been taken
   * already), or null when there is no such code. Two concurrent calls: one sees usedAt null.
   */
  takeAuthorizationCode(hash: string, now: Date): Promise<OAuthCodeRecord | null>;
  insertOAuthTokens(tokens: OAuthTokenInsert[]): Promise<void>;
  /** The token with this hash, and the API key it was issued through (revoked or not). */
  findOAuthToken(
    hash: string,
  ): Promise<{ token: OAuthTokenRecord; key: ApiKeyRecord; accountStatus: AccountStatus } | null>;
  /**
   * Rotation: marks the refresh token used and inserts its successors, in one transaction, only if
   * it was neither used nor revoked; false (nothing written) otherwise.
   */
  rotateRefreshToken(hash: string, now: Date, successors: OAuthTokenInsert[]): Promise<boolean>;
  /** Revokes every unrevoked token of the family. */
  revokeOAuthFamily(familyId: string, now: Date): Promise<void>;
}

export interface TaskCreationLimits {
  /** CREATED + IN_PROGRESS tasks an account may have, counting the new one. */
  maxActiveTasks: number;
  /** The key the create came with (its scope is checked at admission, core admitTasks). */
  key?: { id: string; scope: KeyScope };
}

/** Where a task is in its life: what a waiter compares to tell a change (core taskStepOf). */
export type TaskState = Pick<TaskRecord, 'id' | 'status' | 'attempt'>;

export interface TaskStore {
  /**
   * Inserts the task and debits its cost in one transaction. Throws DomainError
   * `insufficient_tokens` or `too_many_active_tasks` and changes nothing when a limit is hit, and
   * `invalid_media_reference` (naming the first) when an image reference is not an upload of the
   * task's account unexpired at its creation: checked in the same transaction, so that a reference
   * deleted or expiring meanwhile cannot slip in.
   * With `completesKey`, the Idempotency-Key held for this request is completed with `response`
   * in the same transaction, so no crash can leave a charged task whose key a retry could take
   * over; if the lease on the key was lost, it throws `idempotency_in_progress` and changes nothing.
   */
  insertTaskWithDebit(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void>;
  /**
   * insertTaskWithDebit for several tasks of one request (an OpenAI `n` > 1) in ONE transaction:
   * all are stored and debited, or none is (the first refusal is thrown and nothing changes). With
   * `completesKey`, the key is completed in that transaction too.
   */
  insertTasksWithDebits(
    tasks: readonly TaskRecord[],
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void>;
  getTask(accountId: string, taskId: string): Promise<TaskRecord | null>;
  /**
   * The status and attempt of each of these tasks that exists, any account's, in no particular
   * order: enough to tell whether a task changed since a waiter read it (core taskStepOf), for
   * thousands of waited tasks in one read.
   */
  getTaskStates(taskIds: readonly string[]): Promise<TaskState[]>;
  listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>>;
  /**
   * Gives the task's cost back, at most once per task whatever the number of callers.
   * Returns whether this call made the refund.
   */
  refundTask(taskId: string, now: Date): Promise<boolean>;
}

export type MediaSource = 'upload' | 'generated';

export interface MediaRecord {
  id: string;
  accountId: string;
  source: MediaSource;
  contentType: string;
  width: number;
  height: number;
  sizeBytes: number;
  /** hex SHA-256 of the stored bytes */
  sha256: string;
  blobKey: string;
  /** The task that generated it; null for uploads. */
  taskId: string | null;
  createdAt: Date;
  expiresAt: Date;
}

/**
 * Media rows and the blob-deletion queue that keeps blob storage in step with them without ever
 * listing it. Expired media count as gone: the readers below never return them.
 */
export interface MediaStore {
  /**
   * Queues blobKey for deletion at dueAt (replacing an earlier entry for it). A writer calls it
   * with a grace period before putting the blob (a reservation: a crash before insertMedia leaves
   * the blob to the sweeper); a due time of now asks for the blob to go at once.
   */
  scheduleBlobDeletion(blobKey: string, dueAt: Date): Promise<void>;
  /**
   * In one transaction: takes back the reservation of media.blobKey and inserts the row. Returns
   * false and inserts nothing when the reservation is missing or already due (the sweeper may have
   * deleted the blob), so a row can never point at a swept blob.
   */
  insertMedia(media: MediaRecord, now: Date): Promise<boolean>;
  getMedia(accountId: string, mediaId: string, now: Date): Promise<MediaRecord | null>;
  /** Any account's media, for access by signed URL. */
  getMediaById(mediaId: string, now: Date): Promise<MediaRecord | null>;
  /**
   * Deletes the account's unexpired media row and queues its blob for deletion (due now), in one
   * transaction. Returns the blob key, or null when there was no such media.
   */
  deleteMedia(accountId: string, mediaId: string, now: Date): Promise<string | null>;
  /** Deletes up to `limit` expired media rows, queueing their blobs (due now); returns how many. */
  deleteExpiredMedia(now: Date, limit: number): Promise<number>;
  /** Blob keys whose deletion is due, oldest first. */
  listDueBlobDeletions(now: Date, limit: number): Promise<string[]>;
  /** Forgets a due entry once its blob is gone. */
  completeBlobDeletion(blobKey: string, now: Date): Promise<void>;
  /** Blob keys of the given media of the account, for feeding references to the generator. */
  mediaBlobKeys(accountId: string, mediaIds: string[]): Promise<Map<string, string>>;
}

/** A generated image already written to blob storage, to be recorded with the task's completion. */
export interface GeneratedMediaInput {
  id: string;
  blobKey: string;
  contentType: string;
  width: number;
  height: number;
  sizeBytes: number;
  sha256: string;
  expiresAt: Date;
  /** The size the model returned when it was resized and cropped to the catalog's; else null or absent. */
  resizedFrom?: { width: number; height: number } | null;
}

/** A completion as the worker reports it: its attempt's images, already in the blob store. */
export interface TaskCompletion {
  taskId: string;
  attempt: number;
  media: GeneratedMediaInput[];
  now: Date;
}

/** An attempt that failed for good: the task fails with `error` (and is refunded). */
export interface TaskFailureReport {
  taskId: string;
  attempt: number;
  error: { code: string; message: string };
  now: Date;
}

/** An attempt that goes back to the queue, runnable again at runAfter. */
export interface TaskRequeue {
  taskId: string;
  attempt: number;
  runAfter: Date;
  now: Date;
  deferred?: boolean;
}

export interface ClaimPolicy {
  now: Date;
  /** How long the claim is the worker's before another worker may take the task over. */
  leaseMs: number;
  /** Attempts (claims) a task may use; a lease lost on the last one fails the task. */
  maxAttempts: number;
  /** A task not finished this long after creation fails instead of running. */
  deadlineMs: number;
  /** Only tasks of these models (those of a backend with room for a call); absent = any model. */
  models?: readonly string[];
  /**
   * A backend whose calls are limited for the whole cluster (docs/design.md §4.2): a task is
   * claimed only while the backend is not paused and its tasks in progress (tasks of `models`)
   * leave room under its shared limit (core/backend-capacity.ts admitsCall). A task counts as a
   * call in flight from its claim until recordUpstreamCall reports the call's end.
   */
  sharedLimit?: { backend: string; settings: BackendLimitSettings };
}

/**
 * Each remote backend's adaptive limit on calls in flight, one state shared by every process.
 * The decisions are core/backend-capacity.ts's; the store keeps the state and applies them
 * atomically (under the backend's row lock on PostgreSQL).
 */
export interface BackendLimitStore {
  /** Applies one upstream call's outcome to the backend's limit; returns the new state. */
  recordUpstreamCall(input: {
    backend: string;
    /** The attempt whose call ended: from now on it holds none of the backend's capacity. */
    task: { id: string; attempt: number };
    /** The models the backend serves: their tasks in progress are its calls in flight. */
    models: readonly string[];
    outcome: UpstreamOutcome;
    now: Date;
    settings: BackendLimitSettings;
  }): Promise<BackendLimitState>;
  /** Every backend's current state (for metrics). */
  backendLimits(): Promise<Map<string, BackendLimitState>>;
  /** CREATED tasks per model (for metrics). */
  countQueuedTasks(): Promise<Map<string, number>>;
}

/**
 * The tasks table as a queue. Every write that finishes an attempt is fenced by the attempt
 * number: it applies only while the task is IN_PROGRESS under that same attempt, so a worker that
 * lost its lease can never overwrite what a newer attempt (or a cancel) decided. Moving into
 * FAILED or CANCELED refunds in the same transaction; moving into any terminal state enqueues the
 * webhook event (outbox) in the same transaction.
 */
export interface TaskExecutionStore {
  /**
   * Requeues or fails tasks with expired leases, then claims up to `limit` runnable CREATED tasks,
   * serving accounts in turn: the account with the fewest tasks in progress first, then the oldest
   * task (core/task-execution.ts claimOrder). The tasks claimed are those `limit` claims one after
   * another would take; fewer when fewer are runnable (or, with a shared limit, admitted).
   */
  claimTasks(policy: ClaimPolicy, limit: number): Promise<TaskRecord[]>;
  /** Fails (and refunds) the CREATED tasks past their deadline, whatever their model; returns their ids. */
  failTasksPastDeadline(now: Date, deadlineMs: number): Promise<string[]>;
  /** Extends the lease; false when the attempt no longer owns the task (canceled or taken over). */
  renewLease(taskId: string, attempt: number, now: Date, leaseMs: number): Promise<boolean>;
  completeTask(input: TaskCompletion): Promise<boolean>;
  failTask(input: TaskFailureReport): Promise<boolean>;
  /**
   * Back to CREATED, runnable again at runAfter (transient failure, or a release at shutdown).
   * `deferred`: the claim did not spend one of the task's attempts (no capacity for it).
   */
  requeueTask(input: TaskRequeue): Promise<boolean>;
  /** CREATED or IN_PROGRESS → CANCELED with its refund; DomainError not_found / invalid_state otherwise. */
  cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord>;
  getTaskById(taskId: string): Promise<TaskRecord | null>;
}

/** A response kept for replay under an Idempotency-Key: only what the client needs to see it again. */
export interface StoredResponse {
  statusCode: number;
  /** Lower-case names; only the headers that belong to the answer (location, content-type). */
  headers: Record<string, string>;
  body: Buffer;
}

export type IdempotencyClaim =
  /** This request owns the key until it completes or releases it, or its lease runs out. */
  | { outcome: 'acquired' }
  | { outcome: 'replay'; response: StoredResponse }
  /** Another request holds the key and its lease is still live. */
  | { outcome: 'in_progress' }
  /** The key was first used with a different request. */
  | { outcome: 'fingerprint_mismatch' };

/**
 * Idempotency keys, scoped to the account. Each request that acquires a key holds it under its own
 * lease token, so a request whose lease ran out (and was taken over) can no longer complete or
 * release the row that now belongs to its successor.
 */
/** An in-flight key as its holder names it: only the lease token of the current hold moves it. */
export interface IdempotencyKeyHold {
  accountId: string;
  key: string;
  leaseToken: string;
}

export interface IdempotencyClaimRequest {
  accountId: string;
  key: string;
  /** What the key is bound to (method, path, body digest). */
  fingerprint: string;
  /** Identifies this holder, so that only it can complete or release the key. */
  leaseToken: string;
  now: Date;
  leaseMs: number;
  ttlMs: number;
}

/** A held key and the response that completes it. */
export interface IdempotencyCompletion {
  accountId: string;
  key: string;
  leaseToken: string;
  response: StoredResponse;
}

export interface IdempotencyStore {
  /**
   * One transaction: acquires the key when it is new, expired, or held by an in-flight request whose
   * lease ran out; otherwise reports the stored response, a live holder, or a fingerprint mismatch.
   */
  claimIdempotencyKey(input: IdempotencyClaimRequest): Promise<IdempotencyClaim>;
  /** Stores the response for replay; false when the lease was lost to another request. */
  completeIdempotencyKey(input: IdempotencyCompletion): Promise<boolean>;
  /**
   * Extends a held key's lease to `leaseExpiresAt` while its request still runs; false when the
   * lease was lost (taken over, or the key completed or released).
   */
  renewIdempotencyKey(input: IdempotencyKeyHold & { leaseExpiresAt: Date }): Promise<boolean>;
  /** Forgets an in-flight key so that a retry runs afresh; does nothing when the lease was lost. */
  releaseIdempotencyKey(input: IdempotencyKeyHold): Promise<void>;
  /**
   * For the sweeper: deletes at most `limit` keys past their expiry, those that expired first;
   * returns how many. The sweeper calls again while a call deletes `limit`, so that no single
   * call holds the store for long however many keys expired since the last sweep.
   */
  deleteExpiredIdempotencyKeys(now: Date, limit: number): Promise<number>;
}

export type { WebhookDeliveryStatus };

/** One event to one URL; its id is the webhook-id of every attempt. */
export interface WebhookDelivery {
  id: string;
  accountId: string;
  taskId: string;
  eventType: WebhookEventType;
  url: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  /** Attempts made by the retry schedule (manual retries not counted): the schedule's position. */
  scheduledAttempts: number;
  /**
   * Non-null when the queued attempt is a manual retry: then `resumeAt` is the scheduled attempt it
   * went ahead of (null when the schedule had ended or the delivery had succeeded).
   */
  manualRetry: { resumeAt: Date | null } | null;
  nextAttemptAt: Date | null;
  eventAt: Date;
  createdAt: Date;
}

export interface WebhookAttempt {
  attemptedAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface WebhookDeliveryWithAttempts extends WebhookDelivery {
  /** The most recent attempts, oldest first, at most WEBHOOK_ATTEMPTS_KEPT; `attempts` counts them all. */
  attemptLog: WebhookAttempt[];
}

export interface WebhookSecrets {
  current: string;
  /** The rotated-out secret while it is still honoured, else null. */
  previous: string | null;
  previousExpiresAt: Date | null;
}

/** One attempt and what it decided: the delivery's new status and its next attempt, if any. */
export interface WebhookAttemptOutcome {
  deliveryId: string;
  attempt: WebhookAttempt;
  status: WebhookDeliveryStatus;
  nextAttemptAt: Date | null;
  /** A manual retry: it does not advance the retry schedule. */
  manual: boolean;
  now: Date;
}

export interface WebhookStore {
  /** The account's secrets; the first call makes the current one with newSecret. */
  webhookSecrets(accountId: string, now: Date, newSecret: () => string): Promise<WebhookSecrets>;
  rotateWebhookSecret(accountId: string, now: Date, graceMs: number, newSecret: () => string): Promise<WebhookSecrets>;
  /**
   * The oldest due pending delivery, leased: its next attempt moves leaseMs ahead so that no other
   * dispatcher sends it meanwhile, and a dispatcher that dies mid-send is covered by the retry.
   */
  claimDueWebhookDelivery(now: Date, leaseMs: number): Promise<WebhookDelivery | null>;
  recordWebhookAttempt(input: WebhookAttemptOutcome): Promise<void>;
  listWebhookDeliveries(
    accountId: string,
    query: { limit: number; cursor?: string; taskId?: string; status?: WebhookDeliveryStatus },
  ): Promise<Page<WebhookDeliveryWithAttempts>>;
  /**
   * Makes a delivery due now again, whatever its status, within the replay budget
   * (assertReplayAllowed decides, in the same transaction that records the replay);
   * DomainError not_found for another account's.
   */
  replayWebhookDelivery(
    accountId: string,
    deliveryId: string,
    now: Date,
    budget: WebhookReplayBudget,
  ): Promise<WebhookDeliveryWithAttempts>;
}

/** Admin keys (a kind of their own, never an account's) and the append-only audit log of their requests. */
export interface AdminStore {
  insertAdminKey(input: { id: string; name: string; prefix: string; hash: string; now: Date }): Promise<AdminKeyRecord>;
  /** The unrevoked admin key with this hash, or null. */
  findActiveAdminKey(hash: string): Promise<AdminKeyRecord | null>;
  listAdminKeys(): Promise<AdminKeyRecord[]>;
  /** Revokes by id or prefix; false when nothing matched. */
  revokeAdminKey(idOrPrefix: string, now: Date): Promise<boolean>;
  markAdminKeyUsed(keyId: string, now: Date): Promise<void>;
  /** Appends one entry; there is no way to change or remove one (the tables refuse it too). */
  appendAudit(entry: AdminAuditEntry): Promise<void>;
  /** Newest first. */
  listAudit(query: { limit: number; cursor?: string }): Promise<Page<AdminAuditEntry>>;
}

/** Usage counted from the tasks (the one source of truth; a refund is made with the task's FAILED or CANCELED). */
export interface UsageStore {
  usage(query: UsageQuery): Promise<UsageRow[]>;
}

/**
 * The store's aggregates, each the translation of its own tables. Every adapter is split the same
 * way over one connection owner of its own; a transaction that spans aggregates (a create debits
 * the account, a completion inserts media and an outbox row) is made by the owning aggregate with
 * the others' in-transaction functions. A consumer takes only the aggregates it uses, e.g.
 * `Pick<Store, 'tasks' | 'media'>`, or the one aggregate's interface.
 */
export interface StoreAggregates {
  readonly accounts: AccountStore & ApiKeyStore;
  readonly tasks: TaskStore & TaskExecutionStore;
  readonly backendLimits: BackendLimitStore;
  readonly media: MediaStore;
  readonly idempotencyKeys: IdempotencyStore;
  readonly webhooks: WebhookStore;
  readonly oauth: OAuthStore;
  readonly admin: AdminStore;
  readonly usage: UsageStore;
}

/** The persistence port: the aggregates and the store's lifecycle. */
export interface Store extends StoreAggregates {
  readonly kind: 'sqlite' | 'postgres';
  /** Brings the schema to the latest version; safe to call on every start. */
  migrate(): Promise<void>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
