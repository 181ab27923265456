import * as http from 'node:http';
import * as https from 'node:https';
import { upstreamFailure } from '../core/upstream-failure.js';
import { BodyTooLargeError, readBoundedBody } from '../webhooks/bounded-body.js';
import { connectionLookup, egressAgent } from '../webhooks/send-webhook.js';
import { assertWebhookUrlAllowed, WebhookUrlRejectedError, type LookupAll } from '../webhooks/ssrf-guard.js';
import { GenerationError } from './port.js';
import { generationError } from './upstream-call.js';

/** A result larger than this is not downloaded (a 4K PNG is well under it). */
export const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;
/** A download slower than this is abandoned (the attempt's own timeout applies as well). */
export const DOWNLOAD_TIMEOUT_MS = 60_000;

/**
 * Where a provider's result URL may point. The URL is the provider's choice, not ours: like a
 * webhook URL it reaches public addresses only (the same guard, checked again at connect time
 * against DNS rebinding), unless `allowPrivate` (RESULT_URL_ALLOW_PRIVATE: tests and a provider on
 * a private network). The API's own origin is always allowed: it already gets our key.
 */
export interface ResultUrlPolicy {
  apiBaseUrl?: string;
  allowPrivate: boolean;
  /** Resolves host names (tests: a stub mapping a test host to loopback); default the system's. */
  lookup?: LookupAll;
}

/** Where the download connects, and how: the API's own origin as configured, anything else through the guard. */
async function egressFor(href: string, policy: ResultUrlPolicy) {
  const own = policy.apiBaseUrl === undefined ? undefined : new URL(policy.apiBaseUrl).origin;
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    throw notFetched('not a URL');
  }
  if (url.origin === own) return { url, agent: undefined, lookup: undefined };
  try {
    // The webhook rules: https only (http too when private addresses are allowed), no credentials,
    // a host written as it is, and every address it resolves to public.
    const checked = await assertWebhookUrlAllowed(href, { allowPrivate: policy.allowPrivate, lookup: policy.lookup });
    return {
      url: checked,
      agent: egressAgent(checked, policy.allowPrivate),
      lookup: policy.lookup && connectionLookup(policy.lookup),
    };
  } catch (error) {
    if (error instanceof WebhookUrlRejectedError) throw notFetched(error.reason);
    throw error;
  }
}

/**
 * The bytes at `href`, a result URL (OpenAI-compatible providers answer with `url` by default):
 * bounded in size and time, no redirects followed. Rejects with the signal's reason once it
 * aborts; with a GenerationError otherwise.
 */
export async function downloadResult(
  href: string,
  policy: ResultUrlPolicy,
  signal: AbortSignal,
  limits = { maxBytes: MAX_DOWNLOAD_BYTES, timeoutMs: DOWNLOAD_TIMEOUT_MS },
): Promise<Buffer> {
  const { url, agent, lookup } = await egressFor(href, policy);
  signal.throwIfAborted();
  const transport = url.protocol === 'https:' ? https : http;
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      const request = transport.get(
        url,
        { signal: AbortSignal.any([signal, timeout]), ...(agent && { agent }), ...(lookup && { lookup }) },
        (response) => {
          const status = response.statusCode ?? 0;
          // No redirect is followed: a 3xx is as much a failure as a 5xx.
          if (status < 200 || status >= 300) {
            response.resume();
            reject(
              generationError(upstreamFailure('upstream_unavailable'), {
                upstream: { status, reason: 'result download failed' },
              }),
            );
            return;
          }
          readBoundedBody(request, response, limits.maxBytes).then(resolve, (error) =>
            reject(error instanceof BodyTooLargeError ? tooLarge() : error),
          );
        },
      );
      request.on('error', reject);
    });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    if (error instanceof GenerationError) throw error;
    throw generationError(upstreamFailure('upstream_unavailable'), {
      upstream: { reason: timeout.aborted ? 'result download timed out' : 'result download failed' },
    });
  }
}

function notFetched(reason: string) {
  return generationError(upstreamFailure('upstream_no_image'), {
    upstream: { reason: `result url not fetched (${reason})` },
  });
}

function tooLarge() {
  return generationError(upstreamFailure('upstream_invalid_image'), {
    upstream: { reason: 'result download larger than the limit' },
  });
}
