import { once } from 'node:events';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import t, { type Test } from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { encodedImage } from '../helpers/images.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import { startTestS3, testS3Client } from '../helpers/s3.js';
import { needsStore } from '../helpers/store.js';

/**
 * Real processes of the CLI sharing PostgreSQL and S3 (s3rver), each with a DATA_DIR of its own as
 * on separate machines: 2 `api` + 2 `worker`. What one process stored, every other one serves.
 */

interface TaskData {
  task_id: string;
  status: string;
  generated: { media_id: string; url: string; size_bytes: number }[];
}

/** A DATA_DIR of its own for one process, removed when the test ends. */
async function ownDataDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'imagegen-cluster-node-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => !entry.isDirectory()).map((entry) => join(entry.parentPath, entry.name));
}

t.test(
  '2 api and 2 worker processes on one PostgreSQL and one S3: uploads, references and results travel between them',
  await needsStore('postgres'),
  async (t) => {
    const { url, store } = await clusterDatabase(t);
    const { key } = await createAccountWithKey(store, { name: 'cluster', tokens: 1000, now: new Date() });
    const s3 = await startTestS3(t);

    const shared = { DATABASE_URL: url, LOG_LEVEL: 'info', ...s3.env };
    const ports = [await freePort(), await freePort()];
    const dataDirs: string[] = [];
    const nodeEnv = async (env: Record<string, string>) => {
      const dir = await ownDataDir(t);
      dataDirs.push(dir);
      return { ...shared, DATA_DIR: dir, ...env };
    };
    const apis = await Promise.all(
      ports.map(async (port) => startCli(t, ['api'], await nodeEnv({ PORT: String(port), HOST: '127.0.0.1' }))),
    );
    const workers = await Promise.all(
      [1, 2].map(async () => startCli(t, ['worker'], await nodeEnv({ WORKER_CONCURRENCY: '2' }))),
    );
    await Promise.all([
      ...apis.map((api) => api.printed('"msg":"ready"')),
      ...workers.map((w) => w.printed('"msg":"worker started"')),
    ]);
    const api = (i: number) => `http://127.0.0.1:${ports[i]}`;
    const auth = { authorization: `Bearer ${key}` };

    for (const i of [0, 1]) {
      const ready = await fetch(`${api(i)}/readyz`);
      t.match(
        await ready.json(),
        { status: 'ok', checks: { store: 'ok', blobs: 'ok' } },
        `api ${i} reaches the bucket`,
      );
    }

    // An upload received by api 0 …
    const form = new FormData();
    form.append(
      'file',
      new Blob([new Uint8Array(await encodedImage('png', 64, 48))], { type: 'image/png' }),
      'ref.png',
    );
    const uploaded = await fetch(`${api(0)}/api/v1/media`, { method: 'POST', headers: auth, body: form });
    t.equal(uploaded.status, 201);
    const media = ((await uploaded.json()) as { data: { media_id: string; size_bytes: number } }).data;
    const viaOther = await fetch(`${api(1)}/api/v1/media/${media.media_id}/content`, { headers: auth });
    t.equal(viaOther.status, 200, '… is served by api 1');
    t.equal((await viaOther.arrayBuffer()).byteLength, media.size_bytes);

    // … is a reference of tasks created through api 1, run by whichever worker claims them.
    const create = async (prompt: string, imageReference?: string[]) => {
      const response = await fetch(`${api(1)}/api/v1/images/generations`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'beta-v5-pro', prompt, image_reference: imageReference }),
      });
      t.equal(response.status, 202);
      return ((await response.json()) as { data: TaskData }).data.task_id;
    };
    const taskIds = [
      await create('the reference at night', [media.media_id]),
      await create('the reference by day', [media.media_id]),
      await create('a lighthouse at dawn'),
      await create('a storm over the sea'),
    ];
    const tasks: TaskData[] = [];
    for (const [n, taskId] of taskIds.entries()) {
      const response = await fetch(`${api(n % 2)}/api/v1/images/generations/${taskId}?wait=60`, { headers: auth });
      tasks.push(((await response.json()) as { data: TaskData }).data);
    }
    t.same(
      tasks.map((task) => task.status),
      ['COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED'],
    );

    // Each result downloads through either api process, by its signed URL and with the key.
    for (const task of tasks) {
      const [item] = task.generated;
      const signed = new URL(item.url);
      for (const i of [0, 1]) {
        const bySignature = await fetch(`${api(i)}${signed.pathname}${signed.search}`);
        t.equal(bySignature.status, 200, `result of ${task.task_id} by its signed URL on api ${i}`);
        t.equal((await bySignature.arrayBuffer()).byteLength, item.size_bytes);
        const byKey = await fetch(`${api(i)}/api/v1/media/${item.media_id}/content`, { headers: auth });
        t.equal(byKey.status, 200);
        await byKey.arrayBuffer();
      }
    }

    const client = testS3Client(t, s3);
    const objects = (await client.send(new ListObjectsV2Command({ Bucket: s3.bucket }))).Contents ?? [];
    t.same(
      objects.map((o) => o.Key).sort(),
      [media.media_id, ...tasks.map((task) => task.generated[0].media_id)].map((id) => `media/${id}`).sort(),
      'the upload and every result are objects of the bucket',
    );

    for (const child of [...apis, ...workers]) child.kill('SIGTERM');
    const exits = await Promise.all([...apis, ...workers].map((child) => once(child, 'exit')));
    t.same(
      exits.map(([code]) => code),
      [0, 0, 0, 0],
      'every process shuts down cleanly',
    );
    for (const dir of dataDirs) t.same(await filesUnder(dir), [], `no blob (no file at all) in ${dir}`);
  },
);
