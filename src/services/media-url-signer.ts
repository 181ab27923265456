import { createHmac, timingSafeEqual } from 'node:crypto';
import type { MediaUrlSigner } from '../presenters/resources.js';

const RECENT_URLS_KEPT = 10_000;

/**
 * Signed, expiring download URLs: HMAC-SHA256 over "<media_id>.<expires>" with a server secret.
 * Expiry is rounded up to a whole minute so that repeated reads of a task return the same URL
 * (clients and CDNs can cache by URL) while the lifetime stays within a minute of the setting.
 */
export class HmacMediaUrlSigner implements MediaUrlSigner {
  /**
   * The last URL made for each media id. A URL stays the same for a minute, and a page of tasks
   * signs one per generated image, every time it is read; signing was a tenth of the cost of a
   * list (BENCHMARKS.md, "Optimisations"). Map order is insertion order: the first is the oldest.
   */
  private readonly recent = new Map<string, { expires: number; url: string; expiresAt: Date }>();

  constructor(
    private readonly secret: string,
    private readonly publicBaseUrl: string,
    private readonly ttlSeconds: number,
  ) {}

  signedUrl(mediaId: string, now: Date): { url: string; expiresAt: Date } {
    const expires = Math.ceil((now.getTime() / 1000 + this.ttlSeconds) / 60) * 60;
    const cached = this.recent.get(mediaId);
    if (cached?.expires === expires) return { url: cached.url, expiresAt: new Date(cached.expiresAt) };
    const signature = this.signatureOf(mediaId, expires);
    const signed = {
      expires,
      url: `${this.publicBaseUrl}/api/v1/media/${mediaId}/content?expires=${expires}&signature=${signature}`,
      expiresAt: new Date(expires * 1000),
    };
    this.recent.delete(mediaId);
    if (this.recent.size >= RECENT_URLS_KEPT) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(mediaId, signed);
    return { url: signed.url, expiresAt: new Date(signed.expiresAt) };
  }

  /** True only for an unexpired URL signed by this secret for exactly this media id. */
  verify(mediaId: string, expires: number, signature: string, now: Date): boolean {
    if (!Number.isSafeInteger(expires) || expires * 1000 <= now.getTime()) return false;
    const expected = Buffer.from(this.signatureOf(mediaId, expires));
    const given = Buffer.from(signature);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }

  private signatureOf(mediaId: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${mediaId}.${expires}`).digest('base64url');
  }
}
