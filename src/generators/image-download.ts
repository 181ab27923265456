import { upstreamFailure } from '../core/upstream-failure.js';
import { GenerationError } from './port.js';
import { generationError } from './upstream-call.js';

/** A result larger than this is not downloaded (a 4K PNG is well under it). */
export const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;
/** A download slower than this is abandoned (the attempt's own timeout applies as well). */
export const DOWNLOAD_TIMEOUT_MS = 60_000;

/**
 * Whether a result URL a provider named may be fetched: https to any host, or the API's own
 * origin (a provider on loopback in the tests, or one an operator reaches over http on loopback).
 * Nothing else: a plain-http URL elsewhere, a `file:` or `data:` URL, is an egress we do not open.
 */
export function downloadAllowed(url: URL, apiBaseUrl: string | undefined): boolean {
  if (url.protocol === 'https:') return true;
  if (apiBaseUrl === undefined) return false;
  return url.origin === new URL(apiBaseUrl).origin;
}

/**
 * The bytes at `href`, a result URL (OpenAI-compatible providers answer with `url` by default):
 * bounded in size and time, no redirects followed. Rejects with the signal's reason once it
 * aborts; with a GenerationError otherwise.
 */
export async function downloadResult(
  href: string,
  apiBaseUrl: string | undefined,
  signal: AbortSignal,
  limits = { maxBytes: MAX_DOWNLOAD_BYTES, timeoutMs: DOWNLOAD_TIMEOUT_MS },
): Promise<Buffer> {
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    url = new URL('invalid:');
  }
  if (!downloadAllowed(url, apiBaseUrl)) {
    throw generationError(upstreamFailure('upstream_no_image'), {
      upstream: { reason: `result url not fetched (${url.protocol})` },
    });
  }
  try {
    const response = await fetch(url, {
      redirect: 'error',
      signal: AbortSignal.any([signal, AbortSignal.timeout(limits.timeoutMs)]),
    });
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw generationError(upstreamFailure('upstream_unavailable'), {
        upstream: { status: response.status, reason: 'result download failed' },
      });
    }
    const declared = Number(response.headers.get('content-length'));
    if (declared > limits.maxBytes) {
      await response.body.cancel();
      throw tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let received = 0;
    for await (const chunk of response.body) {
      received += chunk.byteLength;
      if (received > limits.maxBytes) throw tooLarge();
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    if (error instanceof GenerationError) throw error;
    throw generationError(upstreamFailure('upstream_unavailable'), {
      upstream: {
        reason:
          error instanceof Error && error.name === 'TimeoutError'
            ? 'result download timed out'
            : 'result download failed',
      },
    });
  }
}

function tooLarge() {
  return generationError(upstreamFailure('upstream_invalid_image'), {
    upstream: { reason: 'result download larger than the limit' },
  });
}
