import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import {
  createImageGenClient,
  type Task,
  uploadMedia,
  verifyWebhook,
  waitForTask,
  watchTask,
} from '../../clients/typescript/index.js';
import { generateClientTypes } from '../../scripts/client-types.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { signWebhook } from '../../src/webhooks/send-webhook.js';
import { buildTestApp } from '../helpers/app.js';
import { encodedImage } from '../helpers/images.js';
import { testWorker } from '../helpers/worker.js';

const run = promisify(execFile);
const documentPath = fileURLToPath(new URL('../../openapi.yaml', import.meta.url));
const committedTypes = readFileSync(new URL('../../clients/typescript/schema.d.ts', import.meta.url), 'utf8');
const flowSource = readFileSync(new URL('../fixtures/generated-client/flow.ts', import.meta.url), 'utf8');
const tsc = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));

/** The app with one in-process worker, listening on a loopback port; returns its origin. */
async function listeningApp(t: Test) {
  const events = new TaskEvents();
  const harness = await buildTestApp(t, {}, { events });
  testWorker(t, harness, { events }).start();
  await harness.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = harness.app.server.address() as AddressInfo;
  const account = await harness.newAccount(1000);
  return { ...harness, ...account, baseUrl: `http://127.0.0.1:${port}` };
}

const pngBlob = async () => new Blob([new Uint8Array(await encodedImage('png', 96, 64))], { type: 'image/png' });

t.test(
  'the committed client types are what openapi-typescript generates from openapi.yaml (run `npm run openapi`)',
  async (t) => {
    t.equal(await generateClientTypes(documentPath), committedTypes);
  },
);

t.test(
  'a flow written only against generated types type-checks with tsc --strict and runs against the app',
  async (t) => {
    const h = await listeningApp(t);
    // Freshly generated types beside the flow, which is pointed at them instead of the committed ones
    // (inside the repository, so that the flow's imports resolve from its node_modules).
    const dir = join(h.dataDir, 'client');
    mkdirSync(dir);
    writeFileSync(join(dir, 'schema.d.ts'), await generateClientTypes(documentPath));
    writeFileSync(join(dir, 'flow.ts'), flowSource.replace("'../../../clients/typescript/schema.js'", "'./schema.js'"));
    t.notOk(flowSource.match(/\bas\s+(?!const\b)[A-Za-z{[]/), 'the flow has no type assertions');
    const checked = await run(
      process.execPath,
      [
        tsc,
        '--strict',
        '--noEmit',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--types',
        'node',
        join(dir, 'flow.ts'),
      ],
      { cwd: dir },
    ).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    t.equal(checked, '', 'tsc --strict reports nothing');

    const flow = await import(pathToFileURL(join(dir, 'flow.ts')).href);
    const result = await flow.runFlow(h.baseUrl, h.key, await pngBlob());
    t.equal(result.status, 'COMPLETED');
    t.same(result.referenced, [result.mediaId], 'the task references the upload');
    t.equal(result.generatedContentType, 'image/png');
    t.ok(result.downloadedBytes > 0, 'the result downloads');
    t.same(result.listedTaskIds, [result.taskId], 'the list shows the task');
    t.same(result.ledgerKinds, ['debit', 'grant'], 'the ledger shows the grant and the debit');
    t.equal(result.headersTyped, true);
  },
);

t.test('the client in clients/typescript uploads, long-polls to a terminal state and verifies webhooks', async (t) => {
  const h = await listeningApp(t);
  const client = createImageGenClient({ baseUrl: h.baseUrl, apiKey: h.key });
  const media = await uploadMedia(client, await pngBlob(), { filename: 'ref.png', idempotencyKey: 'client-upload-1' });
  t.equal(media.content_type, 'image/png');
  const created = await client.POST('/api/v1/images/generations', {
    body: { model: 'alpha-pro', prompt: 'a quiet harbour', image_reference: [media.media_id.toUpperCase()] },
  });
  t.equal(created.response.status, 202);
  t.equal(created.response.headers.get('location'), `/api/v1/images/generations/${created.data?.data.task_id}`);
  const task = await waitForTask(client, created.data!.data.task_id, { timeoutMs: 60_000 });
  t.equal(task.status, 'COMPLETED');
  t.same(task.image_reference, [media.media_id], 'an uppercase reference is stored in its lowercase spelling');

  const secret = (await client.GET('/api/v1/webhooks/secret')).data!.data.secret;
  const body = JSON.stringify({ type: 'image.generation.completed', timestamp: task.completed_at, data: task });
  const at = new Date();
  const headers = {
    'webhook-id': task.task_id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signWebhook(secret, task.task_id, at, body),
  };
  t.equal(verifyWebhook(secret, headers, body).data.task_id, task.task_id, 'a signed delivery verifies');
  t.throws(() => verifyWebhook(secret, headers, body.replace('harbour', 'harbor')), 'an altered body does not');
});

t.test('watchTask follows a task to its end, with the key and through its stream_url', async (t) => {
  const h = await listeningApp(t);
  const client = createImageGenClient({ baseUrl: h.baseUrl, apiKey: h.key });
  const order = ['CREATED', 'IN_PROGRESS', 'COMPLETED'];
  for (const how of ['key', 'stream_url'] as const) {
    const created = await client.POST('/api/v1/images/generations', { body: { model: 'alpha-pro', prompt: how } });
    const task = created.data!.data;
    // stream_url names PUBLIC_BASE_URL; the test's server listens on another port.
    const streamUrl = `${h.baseUrl}${new URL(task.stream_url).pathname}${new URL(task.stream_url).search}`;
    const source = how === 'key' ? { baseUrl: h.baseUrl, apiKey: h.key, taskId: task.task_id } : { streamUrl };
    const seen: Task[] = [];
    for await (const state of watchTask(source)) seen.push(state);
    const statuses = seen.map((s) => s.status);
    t.equal(statuses.at(-1), 'COMPLETED', `${how}: ends COMPLETED`);
    t.same(
      statuses,
      [...statuses].sort((a, b) => order.indexOf(a) - order.indexOf(b)),
      `${how}: states in lifecycle order`,
    );
    t.same(
      seen.at(-1),
      (
        await client.GET('/api/v1/images/generations/{task_id}', {
          params: { path: { task_id: task.task_id } },
        })
      ).data!.data,
      `${how}: the last state is what GET returns`,
    );
  }
});
