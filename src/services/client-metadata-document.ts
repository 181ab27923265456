import * as http from 'node:http';
import * as https from 'node:https';
import { readBoundedBody } from '../webhooks/bounded-body.js';
import { connectionLookup, egressAgent } from '../webhooks/send-webhook.js';
import { assertWebhookUrlAllowed, WebhookUrlRejectedError, type WebhookUrlPolicy } from '../webhooks/ssrf-guard.js';
import { type ClientDocumentReader, OAuthError } from './oauth.js';

/** A client metadata document is a few hundred bytes; the MCP specification suggests 5 KiB at most. */
export const CLIENT_DOCUMENT_MAX_BYTES = 5 * 1024;
/** The person is waiting on the consent page: a host slower than this is not waited for. */
export const CLIENT_DOCUMENT_TIMEOUT_MS = 5_000;

/**
 * Reads OAuth client ID metadata documents (a client_id that is an https URL): the URL is the
 * client's choice, so it goes through the webhook SSRF guard (public addresses only, checked again
 * at connect time), bounded in size and time, no redirect followed. With `allowPrivate` (tests and
 * local development, WEBHOOK_ALLOW_PRIVATE) http and private addresses are allowed, as for webhooks.
 */
export function clientDocumentReader(
  policy: WebhookUrlPolicy,
  limits = { maxBytes: CLIENT_DOCUMENT_MAX_BYTES, timeoutMs: CLIENT_DOCUMENT_TIMEOUT_MS },
): ClientDocumentReader {
  return {
    names(clientId) {
      let url: URL;
      try {
        url = new URL(clientId);
      } catch {
        return false;
      }
      const schemes = policy.allowPrivate ? ['https:', 'http:'] : ['https:'];
      return schemes.includes(url.protocol) && url.pathname !== '/' && url.hash === '' && !clientId.includes('#');
    },
    async read(clientId) {
      let url: URL;
      try {
        url = await assertWebhookUrlAllowed(clientId, policy);
      } catch (error) {
        if (error instanceof WebhookUrlRejectedError)
          throw new OAuthError('invalid_client', `The client metadata document URL is refused (${error.reason}).`);
        throw error;
      }
      const body = await fetchBounded(url, policy, limits).catch((error: Error) => {
        throw new OAuthError('invalid_client', `The client metadata document could not be read: ${error.message}.`);
      });
      let document: unknown;
      try {
        document = JSON.parse(body);
      } catch {
        throw new OAuthError('invalid_client', 'The client metadata document is not JSON.');
      }
      if (typeof document !== 'object' || document === null || Array.isArray(document))
        throw new OAuthError('invalid_client', 'The client metadata document is not a JSON object.');
      return document as Record<string, unknown>;
    },
  };
}

function fetchBounded(url: URL, policy: WebhookUrlPolicy, limits: { maxBytes: number; timeoutMs: number }) {
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<string>((resolve, reject) => {
    const request = transport.get(
      url,
      {
        agent: egressAgent(url, policy.allowPrivate),
        ...(policy.lookup && { lookup: connectionLookup(policy.lookup) }),
        signal: AbortSignal.timeout(limits.timeoutMs),
        headers: { accept: 'application/json' },
      },
      (response) => {
        const status = response.statusCode ?? 0;
        if (status !== 200) {
          response.resume();
          reject(new Error(`status ${status}`));
          return;
        }
        readBoundedBody(request, response, limits.maxBytes).then((body) => resolve(body.toString('utf8')), reject);
      },
    );
    request.on('error', (error) =>
      reject(error.name === 'AbortError' || error.name === 'TimeoutError' ? new Error('timed out') : error),
    );
  });
}
