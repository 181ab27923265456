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
  | 'upstream_quota_exhausted'
  | 'upscale_exceeded'
  | 'generator_unavailable';

export interface UpstreamFailure {
  code: UpstreamFailureKind;
  message: string;
  transient: boolean;
  /**
   * The provider had no capacity for the call (429, RESOURCE_EXHAUSTED, an overloaded 503): not
   * the task's failure. It goes back to the queue without spending an attempt, and the backend's
   * limit comes down (docs/design.md §3.5, §4).
   */
  capacity?: boolean;
  /**
   * At most this many attempts of the task end in this failure before it is final (fewer than
   * TASK_MAX_ATTEMPTS): a reply without an image is worth one more try, not every try.
   */
  maxAttempts?: number;
}

const FAILURES: Record<UpstreamFailureKind, Omit<UpstreamFailure, 'code'>> = {
  content_policy: {
    message: 'The model refused this request under its content policy. Change the prompt or references and try again.',
    transient: false,
  },
  upstream_rejected: { message: 'The model rejected this request as invalid.', transient: false },
  // NO_IMAGE, OTHER, an image-less STOP: another call usually brings the image, so one more try.
  upstream_no_image: { message: 'The model returned no image for this request.', transient: true, maxAttempts: 2 },
  // A broken image in an otherwise good reply is the provider's fault: another try may succeed.
  upstream_invalid_image: { message: 'The model returned an image that could not be decoded.', transient: true },
  upstream_rate_limited: { message: 'The model is busy; the generation could not be run in time.', transient: true },
  upstream_unavailable: { message: 'The model is unavailable; the generation could not be run.', transient: true },
  // A quota that will not come back within the task's deadline (per day): waiting would only hold the tokens.
  upstream_quota_exhausted: {
    message: "The model's usage quota is used up and will not be restored in time for this task.",
    transient: false,
  },
  // The reply is smaller than the resolution sold by more than MAX_UPSCALE: not passed off as it.
  upscale_exceeded: {
    message: 'The model returned an image too small for this resolution; it was not enlarged to pass as it.',
    transient: false,
  },
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
