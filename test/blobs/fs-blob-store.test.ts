import { chmod, mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { FsBlobStore } from '../../src/blobs/fs-blob-store.js';
import { blobStoreContract, failingStream, patternStream } from './blob-store-contract.js';

t.test('FsBlobStore passes the BlobStore contract', async (t) => {
  blobStoreContract(t, async (t) => new FsBlobStore(t.testdir()));
});

t.test('a blob is a file at its key under the root', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  await store.put('media/abc', Buffer.from('bytes'));
  t.equal(await readFile(join(root, 'media', 'abc'), 'utf8'), 'bytes');
});

t.test('a failed streamed put leaves no temp file behind', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  await t.rejects(store.put('media/abc', failingStream(3 * 1024 * 1024)), /source broke/);
  t.same(await readdir(join(root, '.tmp')), []);
  t.same(await readdir(root), ['.tmp'], 'nothing was created at the final key');
});

t.test('a successful put leaves no temp file behind', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  await store.put('media/abc', patternStream(1024 * 1024));
  t.same(await readdir(join(root, '.tmp')), []);
});

t.test('a put that cannot create its directory fails cleanly', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  await store.put('media', Buffer.from('a blob where a directory is needed'));
  await t.rejects(store.put('media/abc', patternStream(1024)));
  t.same(await readdir(join(root, '.tmp')), []);
  t.equal(await store.get('media/abc'), null);
});

t.test('directories removed behind the store are made again by the next put', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  await store.put('media/a', Buffer.from('first'));
  await rm(join(root, 'media'), { recursive: true });
  await store.put('media/b', Buffer.from('after its directory went'));
  t.equal(await readFile(join(root, 'media', 'b'), 'utf8'), 'after its directory went');
  await rm(root, { recursive: true });
  await store.put('media/c', patternStream(1024));
  t.equal((await readFile(join(root, 'media', 'c'))).length, 1024, 'and after the root went');
  t.same(await readdir(join(root, '.tmp')), []);
});

t.test('concurrent puts into one directory all land, whole (their directory syncs shared)', async (t) => {
  const root = t.testdir();
  const store = new FsBlobStore(root);
  const keys = Array.from({ length: 40 }, (_, i) => `media/${String(i).padStart(2, '0')}`);
  const sizes = await Promise.all(keys.map((key, i) => store.put(key, Buffer.alloc(100 + i, i))));
  t.same(
    sizes.map((s) => s.sizeBytes),
    keys.map((_, i) => 100 + i),
  );
  for (const [i, key] of keys.entries()) t.same(await store.getBuffer(key), Buffer.alloc(100 + i, i));
  t.same(
    (await readdir(join(root, 'media'))).sort(),
    keys.map((key) => key.slice('media/'.length)),
  );
});

t.test('sweepTemp removes stale temp files and keeps fresh ones', async (t) => {
  const root = t.testdir({ '.tmp': { stale: 'half a blob', fresh: 'a put in progress' } });
  const hourAndMinuteAgo = new Date(Date.now() - 61 * 60 * 1000);
  await utimes(join(root, '.tmp', 'stale'), hourAndMinuteAgo, hourAndMinuteAgo);
  const store = new FsBlobStore(root);
  t.equal(await store.sweepTemp(), 1);
  t.same(await readdir(join(root, '.tmp')), ['fresh']);
  t.equal(await store.sweepTemp(0), 1);
  t.same(await readdir(join(root, '.tmp')), []);
});

t.test('sweepTemp on a fresh root finds nothing to do', async (t) => {
  const store = new FsBlobStore(join(t.testdir(), 'not-yet-created'));
  t.equal(await store.sweepTemp(), 0);
});

t.test('ping creates a missing root', async (t) => {
  const root = join(t.testdir(), 'nested', 'blobs');
  await new FsBlobStore(root).ping();
  t.same(await readdir(root), ['.tmp']);
});

const runningAsRoot = process.getuid?.() === 0;

t.test(
  'ping rejects when the root cannot be written',
  { skip: runningAsRoot && 'root ignores permissions' },
  async (t) => {
    const root = t.testdir();
    await mkdir(join(root, '.tmp'));
    await chmod(join(root, '.tmp'), 0o500);
    t.teardown(() => chmod(join(root, '.tmp'), 0o700));
    await t.rejects(new FsBlobStore(root).ping());
  },
);

t.test('ping rejects when the root is a file', async (t) => {
  const dir = t.testdir();
  await writeFile(join(dir, 'file'), 'x');
  await t.rejects(new FsBlobStore(join(dir, 'file')).ping());
});
