import type {
  AccountStore,
  BackendLimitStore,
  ApiKeyStore,
  IdempotencyStore,
  MediaStore,
  Store,
  TaskExecutionStore,
  TaskStore,
  WebhookStore,
} from './port.js';

/** An adapter's aggregates, each the translation of its own tables (see AggregateStore). */
export interface StoreAggregates {
  accounts: AccountStore & ApiKeyStore;
  tasks: TaskStore & TaskExecutionStore;
  backendLimits: BackendLimitStore;
  media: MediaStore;
  idempotencyKeys: IdempotencyStore;
  webhooks: WebhookStore;
}

/**
 * The Store port over an adapter's aggregates: every adapter is split the same way (accounts and
 * keys, tasks, media, idempotency keys, webhooks) over one connection owner of its own, and this
 * class only routes each method of the port to the aggregate that owns it. Transactions that span
 * aggregates (a create debits, a completion inserts media and an outbox row) are made by the
 * owning aggregate with the others' in-transaction functions, never here.
 */
export abstract class AggregateStore implements Store {
  abstract readonly kind: Store['kind'];
  protected abstract readonly aggregates: StoreAggregates;
  abstract migrate(): Promise<void>;
  abstract ping(): Promise<void>;
  abstract close(): Promise<void>;

  // AccountStore
  createAccount(...args: Parameters<AccountStore['createAccount']>): ReturnType<AccountStore['createAccount']> {
    return this.aggregates.accounts.createAccount(...args);
  }
  getAccount(...args: Parameters<AccountStore['getAccount']>): ReturnType<AccountStore['getAccount']> {
    return this.aggregates.accounts.getAccount(...args);
  }
  countAccounts(...args: Parameters<AccountStore['countAccounts']>): ReturnType<AccountStore['countAccounts']> {
    return this.aggregates.accounts.countAccounts(...args);
  }
  grantTokens(...args: Parameters<AccountStore['grantTokens']>): ReturnType<AccountStore['grantTokens']> {
    return this.aggregates.accounts.grantTokens(...args);
  }
  listLedger(...args: Parameters<AccountStore['listLedger']>): ReturnType<AccountStore['listLedger']> {
    return this.aggregates.accounts.listLedger(...args);
  }
  ledgerTotals(...args: Parameters<AccountStore['ledgerTotals']>): ReturnType<AccountStore['ledgerTotals']> {
    return this.aggregates.accounts.ledgerTotals(...args);
  }

  // ApiKeyStore
  insertApiKey(...args: Parameters<ApiKeyStore['insertApiKey']>): ReturnType<ApiKeyStore['insertApiKey']> {
    return this.aggregates.accounts.insertApiKey(...args);
  }
  findActiveApiKey(...args: Parameters<ApiKeyStore['findActiveApiKey']>): ReturnType<ApiKeyStore['findActiveApiKey']> {
    return this.aggregates.accounts.findActiveApiKey(...args);
  }
  listApiKeys(...args: Parameters<ApiKeyStore['listApiKeys']>): ReturnType<ApiKeyStore['listApiKeys']> {
    return this.aggregates.accounts.listApiKeys(...args);
  }
  revokeApiKey(...args: Parameters<ApiKeyStore['revokeApiKey']>): ReturnType<ApiKeyStore['revokeApiKey']> {
    return this.aggregates.accounts.revokeApiKey(...args);
  }
  markApiKeyUsed(...args: Parameters<ApiKeyStore['markApiKeyUsed']>): ReturnType<ApiKeyStore['markApiKeyUsed']> {
    return this.aggregates.accounts.markApiKeyUsed(...args);
  }

  // TaskStore
  insertTaskWithDebit(
    ...args: Parameters<TaskStore['insertTaskWithDebit']>
  ): ReturnType<TaskStore['insertTaskWithDebit']> {
    return this.aggregates.tasks.insertTaskWithDebit(...args);
  }
  getTask(...args: Parameters<TaskStore['getTask']>): ReturnType<TaskStore['getTask']> {
    return this.aggregates.tasks.getTask(...args);
  }
  listTasks(...args: Parameters<TaskStore['listTasks']>): ReturnType<TaskStore['listTasks']> {
    return this.aggregates.tasks.listTasks(...args);
  }
  refundTask(...args: Parameters<TaskStore['refundTask']>): ReturnType<TaskStore['refundTask']> {
    return this.aggregates.tasks.refundTask(...args);
  }

  // TaskExecutionStore
  claimNextTask(
    ...args: Parameters<TaskExecutionStore['claimNextTask']>
  ): ReturnType<TaskExecutionStore['claimNextTask']> {
    return this.aggregates.tasks.claimNextTask(...args);
  }
  renewLease(...args: Parameters<TaskExecutionStore['renewLease']>): ReturnType<TaskExecutionStore['renewLease']> {
    return this.aggregates.tasks.renewLease(...args);
  }
  completeTask(
    ...args: Parameters<TaskExecutionStore['completeTask']>
  ): ReturnType<TaskExecutionStore['completeTask']> {
    return this.aggregates.tasks.completeTask(...args);
  }
  failTask(...args: Parameters<TaskExecutionStore['failTask']>): ReturnType<TaskExecutionStore['failTask']> {
    return this.aggregates.tasks.failTask(...args);
  }
  requeueTask(...args: Parameters<TaskExecutionStore['requeueTask']>): ReturnType<TaskExecutionStore['requeueTask']> {
    return this.aggregates.tasks.requeueTask(...args);
  }
  failTasksPastDeadline(
    ...args: Parameters<TaskExecutionStore['failTasksPastDeadline']>
  ): ReturnType<TaskExecutionStore['failTasksPastDeadline']> {
    return this.aggregates.tasks.failTasksPastDeadline(...args);
  }

  // BackendLimitStore
  recordUpstreamCall(
    ...args: Parameters<BackendLimitStore['recordUpstreamCall']>
  ): ReturnType<BackendLimitStore['recordUpstreamCall']> {
    return this.aggregates.backendLimits.recordUpstreamCall(...args);
  }
  backendLimits(): ReturnType<BackendLimitStore['backendLimits']> {
    return this.aggregates.backendLimits.backendLimits();
  }
  countQueuedTasks(): ReturnType<BackendLimitStore['countQueuedTasks']> {
    return this.aggregates.backendLimits.countQueuedTasks();
  }
  cancelTask(...args: Parameters<TaskExecutionStore['cancelTask']>): ReturnType<TaskExecutionStore['cancelTask']> {
    return this.aggregates.tasks.cancelTask(...args);
  }
  getTaskById(...args: Parameters<TaskExecutionStore['getTaskById']>): ReturnType<TaskExecutionStore['getTaskById']> {
    return this.aggregates.tasks.getTaskById(...args);
  }

  // MediaStore
  scheduleBlobDeletion(
    ...args: Parameters<MediaStore['scheduleBlobDeletion']>
  ): ReturnType<MediaStore['scheduleBlobDeletion']> {
    return this.aggregates.media.scheduleBlobDeletion(...args);
  }
  insertMedia(...args: Parameters<MediaStore['insertMedia']>): ReturnType<MediaStore['insertMedia']> {
    return this.aggregates.media.insertMedia(...args);
  }
  getMedia(...args: Parameters<MediaStore['getMedia']>): ReturnType<MediaStore['getMedia']> {
    return this.aggregates.media.getMedia(...args);
  }
  getMediaById(...args: Parameters<MediaStore['getMediaById']>): ReturnType<MediaStore['getMediaById']> {
    return this.aggregates.media.getMediaById(...args);
  }
  deleteMedia(...args: Parameters<MediaStore['deleteMedia']>): ReturnType<MediaStore['deleteMedia']> {
    return this.aggregates.media.deleteMedia(...args);
  }
  deleteExpiredMedia(
    ...args: Parameters<MediaStore['deleteExpiredMedia']>
  ): ReturnType<MediaStore['deleteExpiredMedia']> {
    return this.aggregates.media.deleteExpiredMedia(...args);
  }
  listDueBlobDeletions(
    ...args: Parameters<MediaStore['listDueBlobDeletions']>
  ): ReturnType<MediaStore['listDueBlobDeletions']> {
    return this.aggregates.media.listDueBlobDeletions(...args);
  }
  completeBlobDeletion(
    ...args: Parameters<MediaStore['completeBlobDeletion']>
  ): ReturnType<MediaStore['completeBlobDeletion']> {
    return this.aggregates.media.completeBlobDeletion(...args);
  }
  mediaBlobKeys(...args: Parameters<MediaStore['mediaBlobKeys']>): ReturnType<MediaStore['mediaBlobKeys']> {
    return this.aggregates.media.mediaBlobKeys(...args);
  }

  // IdempotencyStore
  claimIdempotencyKey(
    ...args: Parameters<IdempotencyStore['claimIdempotencyKey']>
  ): ReturnType<IdempotencyStore['claimIdempotencyKey']> {
    return this.aggregates.idempotencyKeys.claimIdempotencyKey(...args);
  }
  completeIdempotencyKey(
    ...args: Parameters<IdempotencyStore['completeIdempotencyKey']>
  ): ReturnType<IdempotencyStore['completeIdempotencyKey']> {
    return this.aggregates.idempotencyKeys.completeIdempotencyKey(...args);
  }
  renewIdempotencyKey(
    ...args: Parameters<IdempotencyStore['renewIdempotencyKey']>
  ): ReturnType<IdempotencyStore['renewIdempotencyKey']> {
    return this.aggregates.idempotencyKeys.renewIdempotencyKey(...args);
  }
  releaseIdempotencyKey(
    ...args: Parameters<IdempotencyStore['releaseIdempotencyKey']>
  ): ReturnType<IdempotencyStore['releaseIdempotencyKey']> {
    return this.aggregates.idempotencyKeys.releaseIdempotencyKey(...args);
  }
  deleteExpiredIdempotencyKeys(
    ...args: Parameters<IdempotencyStore['deleteExpiredIdempotencyKeys']>
  ): ReturnType<IdempotencyStore['deleteExpiredIdempotencyKeys']> {
    return this.aggregates.idempotencyKeys.deleteExpiredIdempotencyKeys(...args);
  }

  // WebhookStore
  webhookSecrets(...args: Parameters<WebhookStore['webhookSecrets']>): ReturnType<WebhookStore['webhookSecrets']> {
    return this.aggregates.webhooks.webhookSecrets(...args);
  }
  rotateWebhookSecret(
    ...args: Parameters<WebhookStore['rotateWebhookSecret']>
  ): ReturnType<WebhookStore['rotateWebhookSecret']> {
    return this.aggregates.webhooks.rotateWebhookSecret(...args);
  }
  claimDueWebhookDelivery(
    ...args: Parameters<WebhookStore['claimDueWebhookDelivery']>
  ): ReturnType<WebhookStore['claimDueWebhookDelivery']> {
    return this.aggregates.webhooks.claimDueWebhookDelivery(...args);
  }
  recordWebhookAttempt(
    ...args: Parameters<WebhookStore['recordWebhookAttempt']>
  ): ReturnType<WebhookStore['recordWebhookAttempt']> {
    return this.aggregates.webhooks.recordWebhookAttempt(...args);
  }
  listWebhookDeliveries(
    ...args: Parameters<WebhookStore['listWebhookDeliveries']>
  ): ReturnType<WebhookStore['listWebhookDeliveries']> {
    return this.aggregates.webhooks.listWebhookDeliveries(...args);
  }
  replayWebhookDelivery(
    ...args: Parameters<WebhookStore['replayWebhookDelivery']>
  ): ReturnType<WebhookStore['replayWebhookDelivery']> {
    return this.aggregates.webhooks.replayWebhookDelivery(...args);
  }
}
