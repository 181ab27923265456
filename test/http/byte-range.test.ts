// Not in the PostgreSQL pass: the Range header parser alone, no store.
import t from 'tap';
import { requestedByteRange } from '../../src/http/byte-range.js';

const ETAG = `"${'a'.repeat(64)}"`;

t.test('one byte range is resolved against the size', async (t) => {
  t.same(requestedByteRange('bytes=0-9', undefined, ETAG, 100), { start: 0, end: 9 });
  t.same(requestedByteRange('bytes=90-', undefined, ETAG, 100), { start: 90, end: 99 });
  t.same(requestedByteRange('bytes=-10', undefined, ETAG, 100), { start: 90, end: 99 });
  t.same(requestedByteRange('bytes=50-500', undefined, ETAG, 100), { start: 50, end: 99 }, 'cut at the end');
  t.same(requestedByteRange('bytes=0-4,5-9', undefined, ETAG, 100), { start: 0, end: 9 }, 'adjacent ranges are one');
  t.same(requestedByteRange('bytes=0-9, 200-', undefined, ETAG, 100), { start: 0, end: 9 }, 'outside: dropped');
});

t.test('a byte range wholly outside the content is unsatisfiable', async (t) => {
  t.equal(requestedByteRange('bytes=100-', undefined, ETAG, 100), 'unsatisfiable');
  t.equal(requestedByteRange('bytes=0-', undefined, ETAG, 0), 'unsatisfiable', 'nothing to send of an empty blob');
});

t.test('what a server may ignore is served whole', async (t) => {
  t.equal(requestedByteRange(undefined, undefined, ETAG, 100), null);
  t.equal(requestedByteRange('bytes=0-1,50-51', undefined, ETAG, 100), null, 'several ranges');
  t.equal(requestedByteRange('items=0-1', undefined, ETAG, 100), null, 'another unit');
  t.equal(requestedByteRange('items=500-600', undefined, ETAG, 100), null, 'another unit, out of range');
  t.equal(requestedByteRange('bytes=a-b', undefined, ETAG, 100), null, 'malformed');
  t.equal(requestedByteRange('bytes=0-9,9-0', undefined, ETAG, 100), null, 'a malformed one in the set');
  t.equal(requestedByteRange('bytes=-5', undefined, ETAG, 0), null, 'a suffix of an empty blob: all of it');
  t.equal(requestedByteRange('bytes=0-9', '"other"', ETAG, 100), null, 'If-Range of another version');
  t.equal(requestedByteRange('bytes=0-9', 'Tue, 24 Nov 2026 10:00:00 GMT', ETAG, 100), null, 'If-Range with a date');
  t.same(requestedByteRange('bytes=0-9', ETAG, ETAG, 100), { start: 0, end: 9 }, 'If-Range of this version');
});
