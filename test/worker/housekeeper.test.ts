import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import t from 'tap';
import { Housekeeper } from '../../src/worker/housekeeper.js';
import { openTestRuntime } from '../helpers/worker.js';

t.test('a housekeeping pass removes blob writes abandoned by a crash, and leaves a fresh one alone', async (t) => {
  const deps = await openTestRuntime(t);
  const tempDir = `${deps.dir}/blobs/.tmp`;
  await mkdir(tempDir, { recursive: true });
  await writeFile(`${tempDir}/abandoned`, 'half a blob');
  const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
  await utimes(`${tempDir}/abandoned`, twoHoursAgo, twoHoursAgo);
  await writeFile(`${tempDir}/in-progress`, 'being written by another process');

  await new Housekeeper({ store: deps.store, blobs: deps.blobs, intervalMs: 60_000 }).runOnce();
  t.same(await readdir(tempDir), ['in-progress']);
});
