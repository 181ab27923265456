import type { WebhookSecrets } from './port.js';

/** One row of webhook_secrets as both adapters read it (times as Dates). */
export interface WebhookSecretRow {
  secret: string;
  retiredAt: Date | null;
  expiresAt: Date | null;
}

/**
 * The account's secrets from its rows still honoured: the one not retired is current; a retired
 * one, still within its grace period, is previous. null when the account has no current secret yet.
 */
export function webhookSecretsOf(rows: readonly WebhookSecretRow[]): WebhookSecrets | null {
  const current = rows.find((r) => r.retiredAt === null);
  if (!current) return null;
  const previous = rows.find((r) => r.retiredAt !== null);
  return {
    current: current.secret,
    previous: previous?.secret ?? null,
    previousExpiresAt: previous?.expiresAt ?? null,
  };
}
