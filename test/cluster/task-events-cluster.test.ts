import pg from 'pg';
import t from 'tap';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { openEventStream } from '../helpers/event-stream.js';
import { postgresTestUrl } from '../helpers/postgres.js';
import { clusterDatabase, freePort, startCli } from '../helpers/processes.js';
import { needsStore } from '../helpers/store.js';

t.test(
  'a stream held by an api process sees the completion made by a worker process (PostgreSQL)',
  await needsStore('postgres'),
  async (t) => {
    const { schema, url, store } = await clusterDatabase(t);
    const { key } = await createAccountWithKey(store, { name: 'streams', tokens: 1000, now: new Date() });

    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const shared = {
      DATABASE_URL: url,
      DATA_DIR: t.testdir({}),
      LOG_LEVEL: 'info',
      PUBLIC_BASE_URL: origin,
      // The fallback re-read never comes round: the worker's changes reach the api only by LISTEN/NOTIFY.
      LONG_POLL_FALLBACK_MS: '600000',
      WORKER_POLL_MS: '200',
    };
    const api = startCli(t, ['api'], { ...shared, PORT: String(port), HOST: '127.0.0.1' });
    await api.printed('"msg":"ready"');

    const created = await fetch(`${origin}/api/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-pro', prompt: 'a harbour seen from two processes' }),
    });
    const task = ((await created.json()) as { data: { task_id: string; stream_url: string } }).data;
    // Without the key: the signed stream_url, as a browser would open it.
    const stream = await openEventStream(task.stream_url);
    t.equal(stream.status, 200);
    const first = await stream.next();
    t.equal(JSON.parse(first!.data).status, 'CREATED');

    const worker = startCli(t, ['worker'], { ...shared, WORKER_CONCURRENCY: '1', WORKER_METRICS_PORT: '0' });
    await worker.printed('"msg":"worker started"');
    let event = await stream.next();
    while (event && !(event.event === 'task' && JSON.parse(event.data).status === 'COMPLETED'))
      event = await stream.next();
    const receivedAt = Date.now();
    t.ok(event, 'the completion reached the stream');
    const completed = JSON.parse(event!.data);
    const latency = receivedAt - Date.parse(completed.completed_at);
    t.comment(`completion → event on the api process: ${latency} ms`);
    t.ok(latency < 2_000, `seen within the long-poll's latency, not the fallback's 600 s (${latency} ms)`);
    t.equal((await stream.next())?.event, 'done');
    t.equal(await stream.next(), null);

    const admin = new pg.Client({ connectionString: postgresTestUrl() });
    await admin.connect();
    t.teardown(() => admin.end());
    const { rows } = await admin.query(`SELECT status FROM ${schema}.tasks WHERE id = $1`, [task.task_id]);
    t.equal(rows[0].status, 'COMPLETED');
  },
);
