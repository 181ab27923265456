/**
 * Media deletes without HTTP: 50 concurrent clients delete 2 000 media through the store, each as
 * DELETE /media/{id} does (the row, then the blob's queue entry once the blob is gone). Reports
 * wall time and main-thread CPU per delete. Give built checkouts to compare them with this one,
 * alternating runs (BENCHMARKS.md row 18).
 *
 *   npx tsx bench/media-delete-probe.ts [/path/to/other/checkout …]
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { runProbeRounds, withProbeStore } from './lib/probe.js';

const MEDIA = 2000;
const CLIENTS = 50;
const ROUNDS = 3;

async function deleteAll(root: string): Promise<string> {
  const { createAccountWithKey } = await import(join(root, 'dist/src/services/api-keys.js'));
  return withProbeStore(root, {}, async (store) => {
    const { account } = await createAccountWithKey(store, { name: 'probe', tokens: 0, now: new Date() });
    const now = new Date();
    const expiresAt = new Date(now.getTime() + 86_400_000);
    const ids: string[] = [];
    for (let i = 0; i < MEDIA; i++) {
      const id = randomUUID();
      ids.push(id);
      // A blob is reserved (queued for deletion later) before its row is inserted, as uploads do.
      await store.scheduleBlobDeletion(`probe/${id}`, expiresAt);
      const media = { id, accountId: account.id, source: 'upload' as const, contentType: 'image/png', width: 1, height: 1, sizeBytes: 1, sha256: '00', blobKey: `probe/${id}`, taskId: null, createdAt: now, expiresAt };
      if (!(await store.insertMedia(media, now))) throw new Error('media not inserted');
    }
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < ids.length) {
          const blobKey = await store.deleteMedia(account.id, ids[next++], new Date());
          if (!blobKey) throw new Error('media not deleted');
          await store.completeBlobDeletion(blobKey, new Date());
        }
      }),
    );
    const ms = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    return `${MEDIA} deletes in ${ms.toFixed(0)} ms (${Math.round((MEDIA / ms) * 1000)}/s), ${Math.round((cpu.user + cpu.system) / MEDIA)} µs CPU each`;
  });
}

await runProbeRounds(ROUNDS, deleteAll);
