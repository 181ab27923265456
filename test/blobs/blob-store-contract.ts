import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Test } from 'tap';
import { InvalidBlobKeyError, type BlobStore } from '../../src/blobs/port.js';

const MiB = 1024 * 1024;
const CHUNK_BYTES = 64 * 1024;

/** Behaviour every BlobStore adapter must have. makeStore gets the subtest, for testdir/teardown. */
export function blobStoreContract(t: Test, makeStore: (t: Test) => Promise<BlobStore>): void {
  const newKey = () => `media/${randomUUID()}`;

  t.test('put then get returns the same bytes and size (buffer body)', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    const bytes = Buffer.from('hello blob');
    t.same(await store.put(key, bytes), { sizeBytes: bytes.length });
    const got = await store.get(key);
    t.ok(got);
    t.equal(got!.sizeBytes, bytes.length);
    t.same(await readAll(got!.body), bytes);
    t.same(await store.getBuffer(key), bytes);
  });

  t.test('put then get returns the same bytes and size (streamed body of several MiB)', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    const sizeBytes = 5 * MiB + 123;
    t.same(await store.put(key, patternStream(sizeBytes)), { sizeBytes });
    const got = await store.get(key);
    t.ok(got);
    t.equal(got!.sizeBytes, sizeBytes);
    t.equal(await sha256OfStream(got!.body), await sha256OfStream(patternStream(sizeBytes)));
  });

  t.test('a ranged get returns exactly the bytes of the range', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    const sizeBytes = 3 * MiB + 5;
    await store.put(key, patternStream(sizeBytes));
    const whole = await store.getBuffer(key);
    // Not bytes=0-0: s3rver 3.7 reads an end of 0 as "to the end" (S3 sends one byte).
    for (const range of [
      { start: 0, end: 1 },
      { start: 1, end: 1 },
      { start: 10, end: 99 },
      { start: MiB - 3, end: 2 * MiB + 3 },
      { start: sizeBytes - 1, end: sizeBytes - 1 },
      { start: 0, end: sizeBytes - 1 },
    ]) {
      const got = await store.get(key, range);
      t.equal(got?.sizeBytes, range.end - range.start + 1, `size of ${range.start}-${range.end}`);
      t.same(got && (await readAll(got.body)), whole!.subarray(range.start, range.end + 1));
    }
    t.equal(await store.get(newKey(), { start: 0, end: 9 }), null, 'a missing key is null with a range too');
  });

  t.test('an empty blob is a blob', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    t.same(await store.put(key, Buffer.alloc(0)), { sizeBytes: 0 });
    t.same(await store.getBuffer(key), Buffer.alloc(0));
    t.equal(await sizeReportedByGet(store, key), 0);
    const streamed = newKey();
    t.same(await store.put(streamed, Readable.from([])), { sizeBytes: 0 }, 'from an empty stream too');
    const got = await store.get(streamed);
    t.same(got && (await readAll(got.body)), Buffer.alloc(0));
  });

  t.test('put overwrites an existing blob', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    await store.put(key, Buffer.from('first value, longer'));
    await store.put(key, Readable.from([Buffer.from('second')]));
    t.same(await store.getBuffer(key), Buffer.from('second'));
    t.equal(await sizeReportedByGet(store, key), 6);
  });

  t.test('keys with spaces, Unicode and URL-special characters round-trip through every operation', async (t) => {
    const store = await makeStore(t);
    const keys = [
      `media/with space ${randomUUID()}`,
      `médias/ünïcødé 東京 🖼 ${randomUUID()}`,
      `media/a+b%20c?d=e&f#g ${randomUUID()}`,
      `media/trailing space ${randomUUID()} `,
    ];
    for (const key of keys) {
      const bytes = Buffer.from(`content of ${key}`);
      t.same(await store.put(key, bytes), { sizeBytes: bytes.length }, `put ${key}`);
      t.same(await store.getBuffer(key), bytes, `getBuffer ${key}`);
      const got = await store.get(key);
      t.same(got && (await readAll(got.body)), bytes, `get ${key}`);
    }
    // Neighbours that a careless encoding would confuse with the keys above stay apart.
    t.equal(await store.getBuffer(keys[0].replace(' ', '%20')), null, 'an encoded space is another key');
    t.equal(await store.getBuffer(keys[0].replace(' ', '+')), null, 'a plus is another key');
    for (const key of keys) {
      await store.delete(key);
      t.equal(await store.getBuffer(key), null, `deleted ${key}`);
    }
  });

  t.test('a second put to the same key replaces the first, by stream over a buffer and back', async (t) => {
    const store = await makeStore(t);
    const key = `media/twice ${randomUUID()}`;
    await store.put(key, patternStream(MiB + 1));
    await store.put(key, Buffer.from('short'));
    t.same(await store.getBuffer(key), Buffer.from('short'));
    await store.put(key, Readable.from([]));
    t.same(await store.getBuffer(key), Buffer.alloc(0), 'an empty stream overwrites too');
    t.equal(await sizeReportedByGet(store, key), 0);
  });

  t.test('get and getBuffer of a missing key return null', async (t) => {
    const store = await makeStore(t);
    t.equal(await store.get(newKey()), null);
    t.equal(await store.getBuffer(newKey()), null);
  });

  t.test('a key prefix of stored blobs is not itself a blob', async (t) => {
    const store = await makeStore(t);
    await store.put(newKey(), Buffer.from('x'));
    t.equal(await store.get('media'), null);
    t.equal(await store.getBuffer('media'), null);
    await store.delete('media');
  });

  t.test('delete removes the blob and is idempotent', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    await store.put(key, Buffer.from('x'));
    await store.delete(key);
    t.equal(await store.get(key), null);
    await store.delete(key);
    await store.delete(newKey());
  });

  t.test('invalid keys are rejected by every operation', async (t) => {
    const store = await makeStore(t);
    const invalidKeys = [
      '',
      '/media/x',
      'media//x',
      'media/',
      '../x',
      'media/../../x',
      'media/./x',
      '.',
      '..',
      '.tmp/x',
      'media/.hidden',
      'media\\x',
      'media/x\0',
      'media/x\ny',
      'media/x\u007f',
      'media/\ud800',
      `${'a/'.repeat(256)}a`,
      'a'.repeat(256),
      `media/${'é'.repeat(128)}`,
    ];
    for (const key of invalidKeys) {
      await t.rejects(store.put(key, Buffer.from('x')), InvalidBlobKeyError, `put ${JSON.stringify(key)}`);
      await t.rejects(store.get(key), InvalidBlobKeyError, `get ${JSON.stringify(key)}`);
      await t.rejects(store.getBuffer(key), InvalidBlobKeyError, `getBuffer ${JSON.stringify(key)}`);
      await t.rejects(store.delete(key), InvalidBlobKeyError, `delete ${JSON.stringify(key)}`);
    }
  });

  t.test('a put rejected for its key still disposes of the stream it was given', async (t) => {
    const store = await makeStore(t);
    const body = patternStream(MiB);
    await t.rejects(store.put('../escape', body), InvalidBlobKeyError);
    t.ok(body.destroyed);
  });

  t.test('a stream that fails midway leaves no blob under the key', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    await t.rejects(store.put(key, failingStream(2 * MiB)), /source broke/);
    t.equal(await store.get(key), null);
    t.equal(await store.getBuffer(key), null);
  });

  t.test('a stream that fails midway leaves the previous value intact', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    await store.put(key, Buffer.from('previous'));
    await t.rejects(store.put(key, failingStream(2 * MiB)), /source broke/);
    t.same(await store.getBuffer(key), Buffer.from('previous'));
    t.equal(await sizeReportedByGet(store, key), 8);
  });

  t.test('a reader that started before an overwrite sees one whole version', async (t) => {
    const store = await makeStore(t);
    const key = newKey();
    const sizeBytes = 3 * MiB;
    await store.put(key, patternStream(sizeBytes));
    const got = await store.get(key);
    await store.put(key, Buffer.from('replacement'));
    const seen = await readAll(got!.body);
    const old = await readAll(patternStream(sizeBytes));
    t.ok(
      seen.equals(old) || seen.equals(Buffer.from('replacement')),
      'the reader sees the old or the new blob, never a mix',
    );
  });

  t.test('ping resolves on a usable store', async (t) => {
    const store = await makeStore(t);
    await t.resolves(store.ping());
  });
}

/** Deterministic bytes in chunks, so two streams of the same size hash the same. */
export function patternStream(sizeBytes: number): Readable {
  return Readable.from(patternChunks(sizeBytes));
}

function* patternChunks(sizeBytes: number): Generator<Buffer> {
  let index = 0;
  for (let offset = 0; offset < sizeBytes; offset += CHUNK_BYTES) {
    const chunk = Buffer.alloc(Math.min(CHUNK_BYTES, sizeBytes - offset), index++ % 251);
    if (chunk.length >= 4) chunk.writeUInt32BE(index, 0);
    yield chunk;
  }
}

/** Yields bytesBeforeFailure bytes, then errors like a dropped upload connection. */
export function failingStream(bytesBeforeFailure: number): Readable {
  return Readable.from(
    (function* () {
      yield* patternChunks(bytesBeforeFailure);
      throw new Error('source broke');
    })(),
  );
}

/** Destroys the body it did not need: get hands over an open stream. */
async function sizeReportedByGet(store: BlobStore, key: string): Promise<number | undefined> {
  const got = await store.get(key);
  got?.body.destroy();
  return got?.sizeBytes;
}

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function sha256OfStream(body: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of body) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
