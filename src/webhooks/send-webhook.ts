import { randomBytes } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from 'request-filtering-agent';
import { Webhook } from 'standardwebhooks';
import type { LookupAll } from './ssrf-guard.js';

export interface WebhookAttemptResult {
  ok: boolean;
  /** Null when no HTTP response arrived (network error, refusal, timeout). */
  statusCode: number | null;
  /** Why no HTTP response arrived; null when one did (the status code tells the outcome). */
  error: string | null;
  durationMs: number;
  responseSnippet: string | null;
  /** True for 410 Gone: the receiver asked us never to retry. */
  stop: boolean;
}

export interface SendWebhookArgs {
  url: string;
  webhookId: string;
  timestamp: Date;
  body: string;
  /** whsec_ secrets; two during rotation, so receivers holding either key can verify. */
  secrets: string[];
  allowPrivate: boolean;
  timeoutMs?: number;
  lookup?: LookupAll;
}

export const DEFAULT_WEBHOOK_TIMEOUT_MS = 15_000;
export const RESPONSE_SNIPPET_MAX_BYTES = 4096;
const USER_AGENT = 'imagegen-service-webhooks/1';
const WEBHOOK_SECRET_PREFIX = 'whsec_';
// Standard Webhooks asks for 24–64 random bytes; 32 matches the HMAC-SHA256 block strength.
const WEBHOOK_SECRET_BYTES = 32;

// The agents check the address actually connected (after DNS), so a name that re-resolves to a
// private address between task create and delivery (DNS rebinding) is still refused.
const publicOnlyAgents = { http: new RequestFilteringHttpAgent(), https: new RequestFilteringHttpsAgent() };
const privateAllowedAgents = {
  http: new RequestFilteringHttpAgent({ allowPrivateIPAddress: true }),
  https: new RequestFilteringHttpsAgent({ allowPrivateIPAddress: true }),
};

/**
 * The agent for an outbound request to a URL someone else chose (a webhook receiver, a provider's
 * result URL): it refuses a connection to a non-public address unless `allowPrivate`.
 */
export function egressAgent(url: URL, allowPrivate: boolean) {
  const agents = allowPrivate ? privateAllowedAgents : publicOnlyAgents;
  return url.protocol === 'https:' ? agents.https : agents.http;
}

export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(WEBHOOK_SECRET_BYTES).toString('base64');
}

/** 'v1,<base64>' per Standard Webhooks. */
export function signWebhook(secret: string, webhookId: string, timestamp: Date, body: string): string {
  return new Webhook(secret).sign(webhookId, timestamp, body);
}

/** One delivery attempt. Never throws for network failures; redirects are not followed. */
export async function sendWebhook(args: SendWebhookArgs): Promise<WebhookAttemptResult> {
  const startedAt = performance.now();
  const failure = (error: string): WebhookAttemptResult => ({
    ok: false,
    statusCode: null,
    error,
    durationMs: performance.now() - startedAt,
    responseSnippet: null,
    stop: false,
  });

  let url: URL;
  try {
    url = new URL(args.url);
  } catch {
    return failure('invalid url');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return failure(`unsupported scheme ${url.protocol}`);

  const transport = url.protocol === 'https:' ? https : http;
  const headers = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(args.body),
    'user-agent': USER_AGENT,
    'webhook-id': args.webhookId,
    'webhook-timestamp': String(Math.floor(args.timestamp.getTime() / 1000)),
    'webhook-signature': args.secrets
      .map((secret) => signWebhook(secret, args.webhookId, args.timestamp, args.body))
      .join(' '),
  };

  return new Promise((resolve) => {
    let settled = false;
    let statusCode: number | null = null;
    let snippetBytes = 0;
    let snippet = '';
    const decoder = new StringDecoder('utf8');

    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      // Also drops whatever of the body we did not read.
      request.destroy();
      const ok = error === null && statusCode !== null && statusCode >= 200 && statusCode < 300;
      resolve({
        ok,
        statusCode,
        error,
        durationMs: performance.now() - startedAt,
        responseSnippet: statusCode === null ? null : snippet,
        stop: statusCode === 410,
      });
    };

    const request = transport.request(
      url,
      {
        method: 'POST',
        headers,
        agent: egressAgent(url, args.allowPrivate),
        ...(args.lookup && { lookup: connectionLookup(args.lookup) }),
      },
      (response) => {
        statusCode = response.statusCode ?? null;
        response.on('data', (chunk: Buffer) => {
          const wanted = chunk.subarray(0, RESPONSE_SNIPPET_MAX_BYTES - snippetBytes);
          snippetBytes += wanted.length;
          snippet += decoder.write(wanted);
          if (snippetBytes >= RESPONSE_SNIPPET_MAX_BYTES) finish(null);
        });
        response.on('end', () => finish(null));
        response.on('close', () => finish(null));
      },
    );
    // Connection failures under happy eyeballs arrive as an AggregateError with an empty message.
    request.on('error', (error: NodeJS.ErrnoException) => finish(error.message || error.code || error.name));
    request.end(args.body);

    // One deadline for DNS, connect, headers and body. Once a status arrived the receiver has
    // answered, so a slow body only cuts the snippet short.
    const deadline = setTimeout(
      () => finish(statusCode === null ? 'timeout' : null),
      args.timeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS,
    );
  });
}

/** Adapts a LookupAll to the callback lookup net.connect calls, so the agent checks its answer. */
export function connectionLookup(lookupAll: LookupAll): LookupFunction {
  return (hostname, options, callback) => {
    lookupAll(hostname).then(
      (addresses) => {
        if (options.all) return callback(null, addresses);
        const [first] = addresses;
        if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
        callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };
}
