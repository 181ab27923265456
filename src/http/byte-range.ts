import { combineRanges, parse as parseRange } from 'range-parser';
import type { ByteRange } from '../blobs/port.js';

/**
 * The part of a representation of sizeBytes to send for a Range header (RFC 9110 14): one byte
 * range, 'unsatisfiable' (416), or null for the whole of it: no Range, an If-Range that is not our
 * current ETag (we give no Last-Modified, so a date never matches), another unit, several ranges
 * that do not merge into one (served whole rather than as multipart/byteranges; ranges that
 * overlap or touch are one range) or a malformed header, which is ignored. A suffix range longer
 * than the representation is all of it (RFC 9110 14.1.3), not unsatisfiable.
 */
export function requestedByteRange(
  range: string | undefined,
  ifRange: string | string[] | undefined,
  etag: string,
  sizeBytes: number,
): ByteRange | 'unsatisfiable' | null {
  if (range === undefined) return null;
  if (ifRange !== undefined && (typeof ifRange !== 'string' || ifRange.trim() !== etag)) return null;
  const parsed = parseRange(sizeBytes, range);
  // code bit 1: a malformed range in the set; the header is ignored as a whole.
  if (parsed.type !== 'bytes' || (parsed.code & 1) !== 0) return null;
  // Only ranges wholly outside the representation (code bit 2) and none left: ours to refuse.
  if (parsed.ranges.length === 0) return (parsed.code & 2) !== 0 ? 'unsatisfiable' : null;
  const ranges = combineRanges(parsed.ranges);
  if (ranges.length !== 1) return null;
  return { start: ranges[0].start, end: ranges[0].end };
}
