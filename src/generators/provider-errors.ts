import { type UpstreamFailure, upstreamFailure, upstreamFailureOfStatus } from '../core/upstream-failure.js';

/*
 * The providers' wire formats of a failure, read by the generators: HTTP Retry-After, OpenAI's
 * rate-limit headers, and google.rpc.Status bodies with their typed details. What a failure means
 * (retried, capacity, the operator's problem) is the core's (src/core/upstream-failure.ts); this
 * module only turns what a provider sent into one of its kinds.
 */

/**
 * Retry-After (RFC 9110 10.2.3): delay-seconds or an HTTP date. Returns milliseconds from `now`,
 * or undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | null | undefined, now: Date): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP date names its day and month; Date.parse would also take "-5" as a year.
  if (!/[A-Za-z]/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/** A protobuf Duration as JSON ("37s", "1.5s"), as in google.rpc.RetryInfo.retryDelay. */
export function durationMs(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const match = /^(\d+(?:\.\d+)?)s$/.exec(value.trim());
  return match ? Math.round(Number(match[1]) * 1000) : undefined;
}

/**
 * A Go-style duration as OpenAI's x-ratelimit-reset-requests / -tokens carry it ("1s", "6m0s",
 * "20ms", "1h2m3.5s"): milliseconds, or undefined when unreadable.
 */
export function goDurationMs(value: string | null | undefined): number | undefined {
  const text = value?.trim();
  if (!text || !/^(\d+(\.\d+)?(h|ms|m|s))+$/.test(text)) return undefined;
  const unitMs = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 } as const;
  let total = 0;
  for (const [, amount, , unit] of text.matchAll(/(\d+(\.\d+)?)(h|ms|m|s)/g)) {
    total += Number(amount) * unitMs[unit as keyof typeof unitMs];
  }
  return Math.round(total);
}

/**
 * OpenAI's rate-limit headers (https://platform.openai.com/docs/guides/rate-limits, "Rate limits in
 * headers") as a Retry-After: the reset of each limit whose remaining count is 0; the later one
 * when both are. Undefined when neither is exhausted or a reset is unreadable.
 */
export function rateLimitResetMs(header: (name: string) => string | null | undefined): number | undefined {
  let wait: number | undefined;
  for (const limit of ['requests', 'tokens']) {
    if (header(`x-ratelimit-remaining-${limit}`)?.trim() !== '0') continue;
    const reset = goDurationMs(header(`x-ratelimit-reset-${limit}`));
    if (reset !== undefined) wait = Math.max(wait ?? 0, reset);
  }
  return wait;
}

/** google.rpc.Status, the error body of the Gemini API (and every Google API). */
export interface GoogleRpcStatus {
  code?: unknown;
  message?: unknown;
  status?: unknown;
  details?: unknown;
}

/**
 * ErrorInfo reasons that mean our own key or project was refused (google.rpc.ErrorInfo as the
 * Gemini API sends it with 400 INVALID_ARGUMENT, 403 PERMISSION_DENIED): an operator must act.
 */
const OPERATOR_ERROR_REASONS = new Set([
  'API_KEY_INVALID',
  'API_KEY_EXPIRED',
  'API_KEY_SERVICE_BLOCKED',
  'API_KEY_HTTP_REFERRER_BLOCKED',
  'API_KEY_IP_ADDRESS_BLOCKED',
  'SERVICE_DISABLED',
  'BILLING_DISABLED',
  'CONSUMER_SUSPENDED',
  'CONSUMER_INVALID',
]);

/**
 * A Gemini API failure from its status and body (https://ai.google.dev/gemini-api/docs/troubleshooting):
 * - an ErrorInfo reason naming our key or project (API_KEY_INVALID comes as 400 INVALID_ARGUMENT),
 *   or FAILED_PRECONDITION (billing not enabled, the free tier not offered in the region) →
 *   `generator_unavailable`;
 * - a 429 whose QuotaFailure names a per-day quota → `upstream_quota_exhausted`; one whose limit is
 *   0 (the project's tier has no quota for the model: billing must be enabled) →
 *   `generator_unavailable`. Neither comes back within a task's deadline, so neither is retried;
 * - otherwise by status (`upstreamFailureOfStatus`).
 */
export function googleFailure(httpStatus: number, body: GoogleRpcStatus | undefined): UpstreamFailure {
  const ofType = (type: string) => googleDetails(body, type);
  const reason = googleErrorInfoReason(body);
  if (reason !== undefined && OPERATOR_ERROR_REASONS.has(reason)) return upstreamFailure('generator_unavailable');
  if (body?.status === 'FAILED_PRECONDITION') return upstreamFailure('generator_unavailable');
  if (httpStatus === 429) {
    const violations = ofType('QuotaFailure').flatMap((d) => (Array.isArray(d.violations) ? d.violations : []));
    const quota = violations as { quotaId?: unknown; quotaValue?: unknown }[];
    const message = typeof body?.message === 'string' ? body.message : '';
    if (quota.some((v) => String(v?.quotaValue) === '0') || /\blimit: 0\b/.test(message))
      return upstreamFailure('generator_unavailable');
    if (quota.some((v) => typeof v?.quotaId === 'string' && /PerDay/i.test(v.quotaId)))
      return upstreamFailure('upstream_quota_exhausted');
  }
  return upstreamFailureOfStatus(httpStatus);
}

/** google.rpc.RetryInfo.retryDelay in a Status's details (the Gemini API puts it in its 429s). */
export function googleRetryDelayMs(body: GoogleRpcStatus | undefined): number | undefined {
  return durationMs(googleDetails(body, 'RetryInfo')[0]?.retryDelay);
}

/** The google.rpc.ErrorInfo reason of a Status (API_KEY_INVALID, …), if any. */
export function googleErrorInfoReason(body: GoogleRpcStatus | undefined): string | undefined {
  const reason = googleDetails(body, 'ErrorInfo')[0]?.reason;
  return typeof reason === 'string' ? reason : undefined;
}

/** The details of one google.rpc type (ErrorInfo, QuotaFailure, RetryInfo, …) in a Status. */
function googleDetails(body: GoogleRpcStatus | undefined, type: string): Record<string, unknown>[] {
  const details = Array.isArray(body?.details) ? (body.details as unknown[]) : [];
  return details.filter(
    (d): d is Record<string, unknown> =>
      typeof d === 'object' &&
      d !== null &&
      typeof (d as { '@type'?: unknown })['@type'] === 'string' &&
      (d as { '@type': string })['@type'].endsWith(`google.rpc.${type}`),
  );
}
