/**
 * How a model provider's failure becomes a task's outcome. Transient failures are retried with
 * backoff (no earlier than the provider's Retry-After); permanent ones fail the task with its
 * refund. The client sees only the stable code and our message, never the provider's text,
 * which can hold request internals.
 */
export type UpstreamFailureKind =
  | 'content_policy'
  | 'upstream_rejected'
  | 'upstream_no_image'
  | 'upstream_invalid_image'
  | 'upstream_rate_limited'
  | 'upstream_unavailable'
  | 'generator_unavailable';

export interface UpstreamFailure {
  code: UpstreamFailureKind;
  message: string;
  transient: boolean;
  /**
   * The provider had no capacity for the call (429, RESOURCE_EXHAUSTED, an overloaded 503): not
   * the task's failure. It goes back to the queue without spending an attempt, and the backend's
   * limit comes down (DESIGN 3.5, 4).
   */
  capacity?: boolean;
}

const FAILURES: Record<UpstreamFailureKind, Omit<UpstreamFailure, 'code'>> = {
  content_policy: {
    message: 'The model refused this request under its content policy. Change the prompt or references and try again.',
    transient: false,
  },
  upstream_rejected: { message: 'The model rejected this request as invalid.', transient: false },
  upstream_no_image: { message: 'The model returned no image for this request.', transient: false },
  // A broken image in an otherwise good reply is the provider's fault: another try may succeed.
  upstream_invalid_image: { message: 'The model returned an image that could not be decoded.', transient: true },
  upstream_rate_limited: { message: 'The model is busy; the generation could not be run in time.', transient: true },
  upstream_unavailable: { message: 'The model is unavailable; the generation could not be run.', transient: true },
  // Our credentials, quota or model name were refused: retrying cannot help until an operator acts.
  generator_unavailable: { message: 'The model backend is not available. Try again later.', transient: false },
};

export function upstreamFailure(kind: UpstreamFailureKind): UpstreamFailure {
  return { code: kind, ...FAILURES[kind] };
}

/** The outcome of an HTTP error status from a provider (a reply that was not a success). */
export function upstreamFailureOfStatus(status: number): UpstreamFailure {
  if (status === 429) return { ...upstreamFailure('upstream_rate_limited'), capacity: true };
  if (status === 503) return { ...upstreamFailure('upstream_unavailable'), capacity: true };
  if (status === 408 || status >= 500) return upstreamFailure('upstream_unavailable');
  if (status === 401 || status === 403 || status === 404) return upstreamFailure('generator_unavailable');
  return upstreamFailure('upstream_rejected');
}

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
