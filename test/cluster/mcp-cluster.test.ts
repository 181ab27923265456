import { once } from 'node:events';
import t from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { encodedImage } from '../helpers/images.js';
import { assertLedgerInvariant } from '../helpers/ledger.js';
import { callTool, problemOf, type ToolResult } from '../helpers/mcp.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

/**
 * Stateless MCP behind a load balancer: one SDK client whose every HTTP request goes to the other
 * of two real `api` processes on one PostgreSQL, and a `worker` process that makes the images.
 */
t.test(
  "one MCP client's calls answered alternately by two api processes on PostgreSQL",
  await needsStore('postgres'),
  async (t) => {
    const { url, store } = await clusterDatabase(t);
    const { account, key } = await createAccountWithKey(store, { name: 'mcp-cluster', tokens: 100, now: new Date() });

    const shared = { DATABASE_URL: url, DATA_DIR: t.testdir({}), LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: '5000' };
    const ports = [await freePort(), await freePort()];
    const apis = ports.map((port) => startCli(t, ['api'], { ...shared, PORT: String(port), HOST: '127.0.0.1' }));
    await Promise.all(apis.map((api) => api.printed('"msg":"ready"')));

    // The "load balancer": each request goes to the other process than the one before.
    const served: number[] = [];
    let next = 0;
    const alternating = (input: string | URL, init?: RequestInit) => {
      const target = new URL(input);
      target.port = String(ports[next]);
      if (init?.method === 'POST') served.push(ports[next]);
      next = 1 - next;
      return fetch(target, init);
    };
    const client = new Client({ name: 'cluster-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${ports[0]}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${key}` } },
        fetch: alternating,
      }),
    );
    t.teardown(() => client.close());
    await client.listTools();
    const structured = <T>(result: ToolResult) => result.structuredContent as T;
    const balance = async () => structured<{ balance: number }>(await callTool(client, 'get_balance')).balance;

    // No worker yet: the task waits in CREATED, so the cancel is certain to find it unfinished.
    const queued = await callTool(client, 'generate_image', {
      model: 'alpha-pro',
      prompt: 'to be canceled',
      wait_seconds: 0,
    });
    const queuedId = structured<{ task: { task_id: string } }>(queued).task.task_id;
    t.equal(await balance(), 75, 'charged on one process, read on the other');
    const canceled = await callTool(client, 'cancel_task', { task_id: queuedId });
    t.equal(structured<{ task: { status: string } }>(canceled).task.status, 'CANCELED');
    t.equal(await balance(), 100, 'refunded');

    const worker = startCli(t, ['worker'], { ...shared, WORKER_CONCURRENCY: '1' });
    await worker.printed('"msg":"worker started"');

    const reference = await callTool(client, 'upload_reference', {
      image_base64: (await encodedImage('png', 200, 200)).toString('base64'),
    });
    const mediaId = structured<{ media_id: string }>(reference).media_id;
    const generated = await callTool(client, 'generate_image', {
      model: 'beta-v5-pro',
      prompt: 'a harbour from the reference',
      image_reference: [mediaId],
      wait_seconds: 30,
    });
    t.notOk(generated.isError);
    const task = structured<{ task: { task_id: string; status: string } }>(generated).task;
    t.equal(task.status, 'COMPLETED', 'completed by the worker process, heard by the api process that waited');
    t.ok(
      generated.content.some((item) => item.type === 'image'),
      'with its preview, read from the shared blobs',
    );
    const read = await callTool(client, 'get_task', { task_id: task.task_id });
    t.equal(structured<{ task: { status: string } }>(read).task.status, 'COMPLETED', 'read on the other process');
    t.equal(problemOf(await callTool(client, 'cancel_task', { task_id: task.task_id })).code, 'invalid_state');
    t.equal(await balance(), 75);

    t.ok(served.filter((port) => port === ports[0]).length >= 5, 'the first process answered calls');
    t.ok(served.filter((port) => port === ports[1]).length >= 5, 'the second process answered calls');
    await client.close();
    for (const child of [worker, ...apis]) child.kill('SIGTERM');
    await Promise.all([worker, ...apis].map((child) => once(child, 'exit')));
    await assertLedgerInvariant(t, store, account.id);
  },
);
