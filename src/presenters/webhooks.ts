import type { WebhookDeliveryWithAttempts, WebhookSecrets } from '../store/port.js';

export function toDeliveryResource(d: WebhookDeliveryWithAttempts) {
  return {
    delivery_id: d.id,
    task_id: d.taskId,
    event_type: d.eventType,
    url: d.url,
    status: d.status,
    attempt_count: d.attempts,
    attempts: d.attemptLog.map((a) => ({
      attempted_at: a.attemptedAt.toISOString(),
      status_code: a.statusCode,
      // An error can quote the receiver's host name; the resource promises at most 1000 characters.
      error: a.error === null ? null : a.error.slice(0, 1000),
      duration_ms: a.durationMs,
    })),
    next_attempt_at: d.status === 'pending' && d.nextAttemptAt ? d.nextAttemptAt.toISOString() : null,
    created_at: d.createdAt.toISOString(),
  };
}

export const toWebhookSecretResource = (secrets: WebhookSecrets) => ({
  secret: secrets.current,
  previous_secret_expires_at: secrets.previousExpiresAt?.toISOString() ?? null,
});
