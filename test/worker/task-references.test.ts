// Not in the PostgreSQL pass: loading a task's references from a fake media store.
import t from 'tap';
import { GenerationError } from '../../src/generators/port.js';
import { loadTaskReferences } from '../../src/worker/task-references.js';

const live = () => new AbortController().signal;
const keys = new Map([
  ['m1', 'blob-1'],
  ['m2', 'blob-2'],
  ['m3', 'blob-3'],
]);

/** A blob store and a generator that write down what happens, in order. */
function recording() {
  const log: string[] = [];
  const deps = {
    store: { mediaBlobKeys: async () => keys },
    blobs: {
      getBuffer: async (key: string) => {
        log.push(`read ${key}`);
        return key === 'blob-missing' ? null : Buffer.from(`raw ${key}`);
      },
    },
  };
  const generator = {
    prepareReference: async (bytes: Buffer, count: number) => {
      log.push(`prepare ${bytes.toString()} of ${count}`);
      return Buffer.from(`prepared ${bytes.toString()}`);
    },
  };
  return { log, deps, generator };
}

t.test(
  'each reference is read and prepared before the next is read; the prepared ones are kept, in order',
  async (t) => {
    const { log, deps, generator } = recording();
    const references = await loadTaskReferences(
      deps,
      { accountId: 'a', imageReference: ['m2', 'm1', 'm3'] },
      generator,
      live(),
    );
    t.same(log, [
      'read blob-2',
      'prepare raw blob-2 of 3',
      'read blob-1',
      'prepare raw blob-1 of 3',
      'read blob-3',
      'prepare raw blob-3 of 3',
    ]);
    t.same(references.map(String), ['prepared raw blob-2', 'prepared raw blob-1', 'prepared raw blob-3']);
  },
);

t.test('a generator without prepareReference gets the references as stored', async (t) => {
  const { deps } = recording();
  const references = await loadTaskReferences(deps, { accountId: 'a', imageReference: ['m1'] }, {}, live());
  t.same(references.map(String), ['raw blob-1']);
});

t.test('a reference no longer stored is reference_unavailable, final; nothing after it is read', async (t) => {
  const { log, deps, generator } = recording();
  const error = await loadTaskReferences(
    deps,
    { accountId: 'a', imageReference: ['m1', 'gone', 'm3'] },
    generator,
    live(),
  ).catch((e: unknown) => e);
  t.ok(error instanceof GenerationError);
  t.match(error, { code: 'reference_unavailable', transient: false });
  t.same(log, ['read blob-1', 'prepare raw blob-1 of 3']);
});

t.test('an aborted task stops between references', async (t) => {
  const { log, deps, generator } = recording();
  const controller = new AbortController();
  const aborting = {
    prepareReference: async (bytes: Buffer, count: number) => {
      controller.abort(new Error('canceled'));
      return generator.prepareReference(bytes, count);
    },
  };
  await t.rejects(
    loadTaskReferences(deps, { accountId: 'a', imageReference: ['m1', 'm2'] }, aborting, controller.signal),
    { message: 'canceled' },
  );
  t.same(log, ['read blob-1', 'prepare raw blob-1 of 2']);
});
