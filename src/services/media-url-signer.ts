import { createHmac, timingSafeEqual } from 'node:crypto';
import type { MediaUrlSigner } from '../presenters/resources.js';

const RECENT_URLS_KEPT = 10_000;

/**
 * What a signed URL opens. A media download signs "<media_id>.<expires>" (as URLs issued before
 * streams did); a task's event stream signs "task-events:<task_id>.<expires>", so that neither
 * signature opens the other.
 */
type SignedScope = { kind: 'media'; id: string } | { kind: 'task-events'; id: string };

/**
 * The API's signed, expiring URLs (media downloads and task event streams): HMAC-SHA256 over the
 * scope and the expiry with a server secret. Expiry is rounded up to a whole minute so that
 * repeated reads of a task return the same URL (clients and CDNs can cache by URL) while the
 * lifetime stays within a minute of the setting.
 */
export class HmacMediaUrlSigner implements MediaUrlSigner {
  /**
   * The last URL made for each scope. A URL stays the same for a minute, and a page of tasks
   * signs one per generated image, every time it is read; signing was a tenth of the cost of a
   * list (docs/performance-history.md, "Optimisations"). Map order is insertion order: the first is the oldest.
   */
  private readonly recent = new Map<string, { expires: number; url: string; expiresAt: Date }>();

  constructor(
    private readonly secret: string,
    private readonly publicBaseUrl: string,
    private readonly ttlSeconds: number,
  ) {}

  signedUrl(mediaId: string, now: Date): { url: string; expiresAt: Date } {
    return this.sign({ kind: 'media', id: mediaId }, now);
  }

  /** The URL of a task's event stream that works without the key (a browser's EventSource). */
  streamUrl(taskId: string, now: Date): { url: string; expiresAt: Date } {
    return this.sign({ kind: 'task-events', id: taskId }, now);
  }

  /** True only for an unexpired URL signed by this secret for exactly this media id. */
  verify(mediaId: string, expires: number, signature: string, now: Date): boolean {
    return this.verifyScope({ kind: 'media', id: mediaId }, expires, signature, now);
  }

  /** True only for an unexpired stream URL signed by this secret for exactly this task. */
  verifyStream(taskId: string, expires: number, signature: string, now: Date): boolean {
    return this.verifyScope({ kind: 'task-events', id: taskId }, expires, signature, now);
  }

  private sign(scope: SignedScope, now: Date): { url: string; expiresAt: Date } {
    const expires = Math.ceil((now.getTime() / 1000 + this.ttlSeconds) / 60) * 60;
    const cacheKey = `${scope.kind}:${scope.id}`;
    const cached = this.recent.get(cacheKey);
    if (cached?.expires === expires) return { url: cached.url, expiresAt: new Date(cached.expiresAt) };
    const query = `expires=${expires}&signature=${this.signatureOf(scope, expires)}`;
    const path =
      scope.kind === 'media' ? `/api/v1/media/${scope.id}/content` : `/api/v1/images/generations/${scope.id}/events`;
    const signed = { expires, url: `${this.publicBaseUrl}${path}?${query}`, expiresAt: new Date(expires * 1000) };
    this.recent.delete(cacheKey);
    if (this.recent.size >= RECENT_URLS_KEPT) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(cacheKey, signed);
    return { url: signed.url, expiresAt: new Date(signed.expiresAt) };
  }

  private verifyScope(scope: SignedScope, expires: number, signature: string, now: Date): boolean {
    if (!Number.isSafeInteger(expires) || expires * 1000 <= now.getTime()) return false;
    const expected = Buffer.from(this.signatureOf(scope, expires));
    const given = Buffer.from(signature);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }

  private signatureOf(scope: SignedScope, expires: number): string {
    const signed = scope.kind === 'media' ? `${scope.id}.${expires}` : `task-events:${scope.id}.${expires}`;
    return createHmac('sha256', this.secret).update(signed).digest('base64url');
  }
}
