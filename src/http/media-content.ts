import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../core/errors.js';
import type { MediaRecord, MediaService } from '../services/media-service.js';
import { requestedByteRange } from './byte-range.js';

const FILE_EXTENSIONS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

/**
 * Answers a read of a media's bytes whose access is already decided: validators and cache
 * lifetime, 304, the object store's presigned redirect where it serves downloads, else the bytes
 * (one byte range at most). No cache may keep the content past the reader's access (its signed
 * URL's expiry, or a key read's own bound: `accessEndsAt`) or past the media's own expiry.
 */
export async function sendMediaContent(
  request: FastifyRequest,
  reply: FastifyReply,
  found: MediaRecord,
  { media, at, accessEndsAt }: { media: MediaService; at: Date; accessEndsAt: Date },
): Promise<FastifyReply> {
  const etag = `"${found.sha256}"`;
  const freshUntilMs = Math.min(accessEndsAt.getTime(), found.expiresAt.getTime());
  const freshForSeconds = Math.max(0, Math.floor((freshUntilMs - at.getTime()) / 1000));
  const cacheControl = `private, max-age=${freshForSeconds}`;
  const contentDisposition = `inline; filename="${found.id}.${FILE_EXTENSIONS[found.contentType] ?? 'bin'}"`;
  reply.header('etag', etag).header('cache-control', cacheControl).header('x-content-type-options', 'nosniff');
  if (matchesEtag(request.headers['if-none-match'], etag)) return reply.code(304).send();

  const direct = await media.directDownloadUrl(found, { contentDisposition, cacheControl }, freshForSeconds);
  // The redirect itself is not cached: its URL lives for minutes, the content for longer.
  if (direct) return reply.code(302).header('location', direct).header('cache-control', 'no-store').send();

  reply.header('accept-ranges', 'bytes');
  const range = requestedByteRange(request.headers.range, request.headers['if-range'], etag, found.sizeBytes);
  if (range === 'unsatisfiable') {
    reply.header('content-range', `bytes */${found.sizeBytes}`);
    throw new DomainError('range_not_satisfiable', `The content has ${found.sizeBytes} bytes.`);
  }
  const content = await media.openContent(found, range ?? undefined);
  if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${found.sizeBytes}`);
  return reply
    .type(found.contentType)
    .header('content-length', content.sizeBytes)
    .header('content-disposition', contentDisposition)
    .send(content.body);
}

/** RFC 9110 If-None-Match: a list of entity tags (weak comparison) or `*`. */
function matchesEtag(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim();
    return tag === '*' || tag.replace(/^W\//, '') === etag;
  });
}
