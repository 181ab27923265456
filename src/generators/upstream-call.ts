import { upstreamFailure, type UpstreamFailure } from '../core/upstream-failure.js';
import { sniffImageType, type ImageType } from '../images/normalize-upload.js';
import { ConcurrencyLimit } from '../concurrency-limit.js';
import { GenerationError, type GenerationErrorDetails } from './port.js';

/**
 * What the remote adapters share: a cap on calls in flight per backend, the caller's signal
 * passed to the SDK, and one rule for what a failed call becomes.
 */
export class UpstreamCalls {
  private readonly limit: ConcurrencyLimit;

  constructor(maxConcurrency: number) {
    this.limit = new ConcurrencyLimit(maxConcurrency);
  }

  /**
   * Runs `call` once a slot is free. An abort (cancel, the worker's timeout, shutdown) rejects
   * with the signal's reason whatever the SDK threw; anything else goes through `classify`.
   */
  async run<T>(signal: AbortSignal, call: () => Promise<T>, classify: (error: unknown) => GenerationError): Promise<T> {
    return this.limit.run(async () => {
      signal.throwIfAborted();
      try {
        return await call();
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (error instanceof GenerationError) throw error;
        throw classify(error);
      }
    }, signal);
  }
}

export function generationError(failure: UpstreamFailure, details: GenerationErrorDetails = {}): GenerationError {
  return new GenerationError(failure.code, failure.message, failure.transient, {
    capacity: failure.capacity,
    maxAttempts: failure.maxAttempts,
    ...details,
  });
}

/** A failure to reach the provider at all (DNS, refused, reset, TLS): worth another try. */
export function networkFailure(error: unknown): GenerationError {
  return generationError(upstreamFailure('upstream_unavailable'), { upstream: { reason: networkErrorCode(error) } });
}

/** The system error code (ECONNREFUSED, ENOTFOUND, …) that fetch wraps in its causes, for the log. */
function networkErrorCode(error: unknown): string {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && code.length > 0) return code;
  }
  return error instanceof Error ? error.name : 'network error';
}

/** References are stored uploads (PNG, JPEG or WebP, checked at upload); providers want their type. */
export function referenceContentType(bytes: Buffer): ImageType {
  const type = sniffImageType(bytes.subarray(0, 16));
  if (!type) throw new GenerationError('reference_unreadable', 'A reference image is not PNG, JPEG or WebP.', false);
  return type;
}
