import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import t, { type Test } from 'tap';
import { parse, stringify } from 'yaml';
import { createAccountWithKey } from '../../src/services/api-keys.js';
import { FakeUpstream, pngBase64 } from '../helpers/fake-upstream.js';
import { kubernetesDir, podContainers, renderKustomization } from '../helpers/kustomize.js';
import {
  containerNames,
  containerTestsSkip,
  logsOf,
  podman,
  ROOT,
  run,
  runContainer,
  servicesStandIn,
  testImage,
  waitExit,
  waitHttp,
} from '../helpers/podman.js';
import { clusterDatabase, freePort } from '../helpers/processes.js';
import { openAiReply } from '../helpers/provider-replies.js';
import { startTestS3 } from '../helpers/s3.js';

/**
 * The image and its roles for real, in podman containers on this machine (docs/deploy.md): the
 * image built on a stand-in of its base, run read-only as non-root; `migrate`, `api` and two
 * `worker`s on PostgreSQL (a worker SIGKILLed, another SIGTERMed mid-generation, an api SIGTERMed
 * under open long-polls and event streams); and the Kubernetes Deployments run by `podman kube
 * play`. Skipped, with the reason, where podman cannot run (and unless IMAGEGEN_CONTAINER_TESTS=1).
 */

const skip = await containerTestsSkip();
// A new object per test: tap writes into the options it is given.
const options = () => ({ skip, timeout: 1_500_000 });
if (skip) t.comment(`container tests skipped: ${skip}`);
// A first run on a machine builds the stand-in base, the stand-in services and the image: more
// than the suite's timeout per file. Later runs find them in podman's storage and its layer cache.
else t.setTimeout(3_600_000);

interface TaskData {
  task_id: string;
  status: string;
  cost: number;
  generated: { url: string; content_type: string }[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function api(base: string, key: string, path: string, init: RequestInit = {}) {
  const response = await fetch(`${base}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers },
  });
  return { status: response.status, body: (await response.json()) as { data: TaskData } };
}

async function createTask(base: string, key: string, model: string, prompt: string): Promise<TaskData> {
  const created = await api(base, key, '/api/v1/images/generations', {
    method: 'POST',
    body: JSON.stringify({ model, prompt }),
  });
  if (created.status !== 202) throw new Error(`create answered ${created.status}: ${JSON.stringify(created.body)}`);
  return created.body.data;
}

/** A task created, long-polled to COMPLETED, and its image downloaded through its signed URL. */
async function createCompleteDownload(t: Test, base: string, key: string, model = 'alpha-pro'): Promise<void> {
  const task = await createTask(base, key, model, 'a lighthouse at dawn');
  let done = task;
  for (let i = 0; i < 6 && done.status !== 'COMPLETED' && done.status !== 'FAILED'; i++)
    done = (await api(base, key, `/api/v1/images/generations/${task.task_id}?wait=20`)).body.data;
  t.equal(done.status, 'COMPLETED', 'the task completes');
  const download = await fetch(done.generated[0].url);
  t.equal(download.status, 200, 'its image downloads');
  const bytes = Buffer.from(await download.arrayBuffer());
  t.ok(bytes.length > 1000, `${bytes.length} bytes of ${download.headers.get('content-type')}`);
}

/** The account's tasks by status, read in the test's schema. */
function statusCounter(t: Test, url: string, accountId: string): () => Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  const connected = client.connect();
  t.teardown(() => client.end());
  return async () => {
    await connected;
    const { rows } = await client.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM tasks WHERE account_id = $1 GROUP BY status',
      [accountId],
    );
    return Object.fromEntries(rows.map((row) => [row.status, row.n]));
  };
}

t.test(
  'the image: built on a stand-in base, read-only and non-root, serves, completes a task, stops within its grace',
  options(),
  async (t) => {
    const { name: image, buildSeconds } = await testImage();
    const [inspected] = JSON.parse(await podman(['image', 'inspect', image])) as {
      Size: number;
      Config: { User: string; Entrypoint: string[]; Cmd: string[]; Env: string[] };
      Healthcheck?: { Test: string[] };
    }[];
    t.equal(inspected.Config.User, '10001:10001', 'runs as a numeric non-root user');
    t.same(inspected.Config.Entrypoint, ['imagegen']);
    t.same(inspected.Config.Cmd, ['serve']);
    t.ok(inspected.Config.Env.includes('DATA_DIR=/data'));
    t.ok(inspected.Healthcheck?.Test.length, 'a HEALTHCHECK');
    const sizes = await podman([
      'run',
      '--rm',
      '--entrypoint',
      'sh',
      image,
      '-c',
      'du -sm /usr/local/bin/node /app/node_modules /app/dist /usr/lib /usr/share 2>/dev/null; du -sm /app/node_modules/* /app/node_modules/@*/* 2>/dev/null | sort -rn | head -n 8',
    ]);
    t.comment(
      `image ${(inspected.Size / 1e6).toFixed(0)} MB, built in ${buildSeconds} s (layer cache included); weighs most (MB):\n${sizes}`,
    );
    const usage = await podman(['run', '--rm', image, 'config']);
    t.match(usage, /SHUTDOWN_GRACE_MS/, '`imagegen config` runs');

    const names = containerNames(t);
    const port = await freePort();
    const name = names('serve');
    await runContainer(
      name,
      ['serve'],
      {
        PORT: String(port),
        HOST: '127.0.0.1',
        WORKER_CONCURRENCY: '1',
        SHUTDOWN_GRACE_MS: '10000',
        SHUTDOWN_DELAY_MS: '1000',
      },
      { volume: names('data') },
    );
    const base = `http://127.0.0.1:${port}`;
    await waitHttp(`${base}/readyz`);
    t.equal((await podman(['exec', name, 'id', '-u'])).trim(), '10001', 'the process runs as 10001');
    const key = /shown only this once:\s+(\S+)/.exec(await logsOf(name))?.[1];
    t.ok(key, 'the first start printed its development key');
    await createCompleteDownload(t, base, key!);
    const health = await podman(['healthcheck', 'run', name]).then(
      () => 'healthy',
      (error: Error) => error.message,
    );
    t.equal(health, 'healthy', 'the HEALTHCHECK passes');

    const stopping = Date.now();
    await podman(['stop', '-t', '30', name], { timeoutMs: 60_000 });
    const stopMs = Date.now() - stopping;
    const [state] = JSON.parse(await podman(['inspect', name])) as { State: { ExitCode: number } }[];
    t.equal(state.State.ExitCode, 0, 'exits 0 on SIGTERM');
    t.ok(stopMs < 10_000, `podman stop took ${stopMs} ms (grace 10 s)`);
    t.match(await logsOf(name), /"msg":"drained"/);
    t.comment(`podman stop of serve: ${stopMs} ms`);
  },
);

t.test(
  'roles on PostgreSQL: migrate, api, two workers; a worker SIGKILLed and one SIGTERMed mid-generation, an api SIGTERMed under 100 long-polls and 20 streams',
  options(),
  async (t) => {
    const { name: image } = await testImage();
    t.ok(image);
    const { url } = await clusterDatabase(t);
    const s3 = await startTestS3(t);
    const upstream = await FakeUpstream.start(t);
    const picture = openAiReply.image(await pngBase64(1024, 1024));
    const names = containerNames(t);
    const apiPort = await freePort();
    const common = {
      DATABASE_URL: url,
      ...s3.env,
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      LOG_LEVEL: 'info',
      PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
      TASK_LEASE_MS: '3000',
      WORKER_POLL_MS: '60000',
      // alpha-pro through a provider whose replies the test holds; beta-v5-pro on the local renderer.
      ALPHA_PRO_BACKEND: 'openai',
      OPENAI_API_KEY: 'sk-containers',
      OPENAI_BASE_URL: `${upstream.url}/v1`,
      OPENAI_IMAGE_MODEL: 'gpt-image-2',
      RATE_LIMIT_REQUESTS_PER_MIN: '100000',
      RATE_LIMIT_CREATES_PER_MIN: '100000',
      MAX_ACTIVE_TASKS: '1000',
    };
    const worker = async (n: number, grace = 3000) => {
      const metricsPort = await freePort();
      await runContainer(names(`worker${n}`), ['worker'], {
        ...common,
        WORKER_CONCURRENCY: '2',
        WORKER_METRICS_PORT: String(metricsPort),
        SHUTDOWN_GRACE_MS: String(grace),
      });
      await waitHttp(`http://127.0.0.1:${metricsPort}/readyz`);
    };

    await runContainer(names('migrate'), ['migrate'], common);
    t.equal(await waitExit(names('migrate')), 0, 'migrate exits 0');
    t.match(await logsOf(names('migrate')), /Database schema is up to date/);
    await runContainer(names('api'), ['api'], { ...common, SHUTDOWN_GRACE_MS: '15000', SHUTDOWN_DELAY_MS: '1000' });
    const base = `http://127.0.0.1:${apiPort}`;
    await waitHttp(`${base}/readyz`);
    await Promise.all([worker(1), worker(2)]);

    const store = (await import('../../src/store/postgres/postgres-store.js')).PostgresStore;
    const check = new store({ connectionString: url, poolSize: 2 });
    t.teardown(() => check.close());
    const tokens = 100_000;
    const { account, key } = await createAccountWithKey(check, { name: 'containers', tokens, now: new Date() });
    const countByStatus = statusCounter(t, url, account.id);

    // A worker SIGKILLed mid-run: its tasks come back when their lease runs out, each completes once.
    const bulk: TaskData[] = [];
    for (let i = 0; i < 40; i++) bulk.push(await createTask(base, key, 'beta-v5-pro', `bulk ${i}`));
    for (let i = 0; i < 200 && ((await countByStatus()).COMPLETED ?? 0) < 5; i++) await sleep(100);
    await podman(['kill', '-s', 'KILL', names('worker1')]);
    for (let i = 0; i < 600 && ((await countByStatus()).COMPLETED ?? 0) < bulk.length; i++) await sleep(200);
    t.same(await countByStatus(), { COMPLETED: bulk.length }, 'every task completed');
    const spent = bulk.reduce((sum, task) => sum + task.cost, 0);
    t.equal(
      (await check.accounts.getAccount(account.id))?.balance,
      tokens - spent,
      'each charged once, nothing refunded',
    );

    // A worker SIGTERMed mid-generation past its grace: released, and the other takes it at once.
    upstream.replyWith({ hang: true }, picture);
    const slow = await createTask(base, key, 'alpha-pro', 'a slow lighthouse');
    await upstream.received(1);
    await worker(3);
    const abandoned = upstream.abandonedCount(1).then(() => Date.now());
    const retaken = upstream.received(2).then(() => Date.now());
    const stopping = Date.now();
    await podman(['stop', '-t', '30', names('worker2')], { timeoutMs: 60_000 });
    const stopMs = Date.now() - stopping;
    const [state] = JSON.parse(await podman(['inspect', names('worker2')])) as { State: { ExitCode: number } }[];
    t.equal(state.State.ExitCode, 0, 'the SIGTERMed worker exits 0');
    t.match(await logsOf(names('worker2')), /task released at shutdown/);
    const gap = (await retaken) - (await abandoned);
    t.ok(gap < 2000, `taken by the other worker ${gap} ms after its release (lease 3 s, poll 60 s)`);
    let done = slow;
    for (let i = 0; i < 5 && done.status !== 'COMPLETED'; i++)
      done = (await api(base, key, `/api/v1/images/generations/${slow.task_id}?wait=10`)).body.data;
    t.equal(done.status, 'COMPLETED');
    t.equal((await check.accounts.getAccount(account.id))?.balance, tokens - spent - slow.cost, 'charged once');
    t.comment(`worker drain: podman stop ${stopMs} ms; released task taken ${gap} ms after the release`);

    // The api SIGTERMed with 100 long-polls and 20 event streams open on tasks no worker will run.
    upstream.replyWith({ hang: true });
    await podman(['stop', '-t', '5', names('worker3')], { timeoutMs: 60_000 });
    const waiting: TaskData[] = [];
    for (let i = 0; i < 10; i++) waiting.push(await createTask(base, key, 'alpha-pro', `waiting ${i}`));
    const auth = { authorization: `Bearer ${key}` };
    const polls = Array.from({ length: 100 }, (_, i) =>
      fetch(`${base}/api/v1/images/generations/${waiting[i % 10].task_id}?wait=60`, { headers: auth }).then(
        async (r) => ({ status: r.status, task: ((await r.json()) as { data: TaskData }).data }),
        (error: Error) => ({ status: 0, error: error.message }),
      ),
    );
    const streams = Array.from({ length: 20 }, (_, i) =>
      fetch(`${base}/api/v1/images/generations/${waiting[i % 10].task_id}/events`, {
        headers: { ...auth, accept: 'text/event-stream' },
      }).then(
        async (r) => ({ status: r.status, text: await r.text() }),
        (error: Error) => ({ status: 0, text: error.message }),
      ),
    );
    for (let i = 0; i < 300; i++) {
      const held = Number(/^imagegen_task_waits (\d+)/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? 0);
      if (held >= 120) break;
      await sleep(100);
    }
    const apiStopping = Date.now();
    await podman(['stop', '-t', '30', names('api')], { timeoutMs: 60_000 });
    const apiStopMs = Date.now() - apiStopping;
    const answered = await Promise.all(polls);
    const ended = await Promise.all(streams);
    const [apiState] = JSON.parse(await podman(['inspect', names('api')])) as { State: { ExitCode: number } }[];
    t.equal(apiState.State.ExitCode, 0, 'the api exits 0');
    const okPolls = answered.filter((r) => r.status === 200 && 'task' in r && r.task.status === 'CREATED').length;
    const reconnects = ended.filter((r) => r.status === 200 && /event: reconnect/.test(r.text)).length;
    t.equal(okPolls, 100, 'every long-poll answered with its task');
    t.equal(reconnects, 20, 'every event stream ended with reconnect');
    t.ok(apiStopMs < 15_000, `podman stop of the api took ${apiStopMs} ms (grace 15 s)`);
    t.comment(`api drain: ${okPolls}/100 long-polls, ${reconnects}/20 streams answered; podman stop ${apiStopMs} ms`);
  },
);

t.test(
  'the Kubernetes Deployments under podman kube play: a task created through the api pod completes in the worker pod',
  options(),
  async (t) => {
    const { name: image } = await testImage();
    const { url } = await clusterDatabase(t);
    const s3 = await startTestS3(t);
    const names = containerNames(t);
    const dir = t.testdir({});
    const apiPort = await freePort();
    const metricsPort = await freePort();
    const objects = renderKustomization(kubernetesDir);
    const configMap = objects.find((o) => o.kind === 'ConfigMap')!;
    const secret = objects.find((o) => o.kind === 'Secret')!;
    // The base's values, with this machine's services: loopback only, the test's schema and s3rver.
    const { AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...s3Config } = s3.env;
    configMap.data = {
      ...configMap.data,
      ...s3Config,
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      WORKER_METRICS_PORT: String(metricsPort),
      PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
      SHUTDOWN_DELAY_MS: '0',
    };
    const secrets: Record<string, string> = {
      ...secret.stringData,
      DATABASE_URL: url,
      AWS_ACCESS_KEY_ID,
      AWS_SECRET_ACCESS_KEY,
    };
    delete secrets.REDIS_URL;
    delete secrets.METRICS_TOKEN;
    // podman kube play reads a Secret from a podman secret holding its keys and base64 values.
    const secretName = names('secrets');
    const secretFile = join(dir, 'secret.json');
    writeFileSync(
      secretFile,
      JSON.stringify(
        Object.fromEntries(Object.entries(secrets).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      ),
    );
    await podman(['secret', 'create', secretName, secretFile]);
    t.teardown(() => podman(['secret', 'rm', secretName]).catch(() => {}));
    const configName = names('config');
    configMap.metadata.name = configName;
    writeFileSync(join(dir, 'configmap.yaml'), stringify(configMap));

    const played: string[] = [];
    for (const deploymentName of ['imagegen-api', 'imagegen-worker']) {
      const deployment = structuredClone(
        objects.find((o) => o.kind === 'Deployment' && o.metadata.name === deploymentName)!,
      );
      deployment.metadata.name = names(deploymentName.replace('imagegen-', ''));
      deployment.spec.replicas = 1;
      for (const container of podContainers(deployment)) {
        container.image = image;
        for (const from of container.envFrom) {
          if (from.configMapRef) from.configMapRef.name = configName;
          if (from.secretRef) {
            // podman kube play resolves secretKeyRef (not envFrom secretRef): one per key.
            container.env = Object.keys(secrets).map((key) => ({
              name: key,
              valueFrom: { secretKeyRef: { name: secretName, key } },
            }));
          }
        }
        container.envFrom = container.envFrom.filter((from: { secretRef?: unknown }) => !from.secretRef);
        // On the host's network podman maps no ports: the probes name the port by number instead.
        const ports = new Map(
          container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]),
        );
        const listening = container.name === 'api' ? apiPort : metricsPort;
        for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
          t.ok(ports.has(container[probe].httpGet.port), `${container.name}: ${probe} names a port of the container`);
          container[probe].httpGet.port = listening;
        }
        delete container.ports;
      }
      const file = join(dir, `${deploymentName}.yaml`);
      writeFileSync(file, stringify(deployment));
      await podman(['kube', 'play', '--network', 'host', '--configmap', join(dir, 'configmap.yaml'), file], {
        timeoutMs: 120_000,
      });
      played.push(file);
    }
    t.teardown(async () => {
      for (const file of played) await podman(['kube', 'down', file]).catch(() => {});
    });
    const base = `http://127.0.0.1:${apiPort}`;
    await waitHttp(`${base}/readyz`);
    await waitHttp(`http://127.0.0.1:${metricsPort}/readyz`);
    const pods = await podman(['ps', '--format', '{{.Names}} {{.Status}}', '--filter', `name=${names('')}`]);
    t.comment(pods);
    const store = (await import('../../src/store/postgres/postgres-store.js')).PostgresStore;
    const check = new store({ connectionString: url, poolSize: 1 });
    t.teardown(() => check.close());
    const { key } = await createAccountWithKey(check, { name: 'kube', tokens: 1000, now: new Date() });
    await createCompleteDownload(t, base, key, 'beta-v5-pro');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    t.teardown(() => client.end());
    const { rows } = await client.query(
      objects.find((o) => o.kind === 'ScaledObject')!.spec.triggers[0].metadata.query as string,
    );
    t.equal(Number(rows[0].count), 0, "KEDA's query: nothing left to run");
  },
);

t.test(
  'deploy/compose.yaml: the stack comes up, a task is created, completed and downloaded through it',
  options(),
  async (t) => {
    const { name: image } = await testImage();
    const standIn = await servicesStandIn();
    const names = containerNames(t);
    const dir = t.testdir({});
    const [pgPort, redisPort, s3Port, apiPort, metricsPort] = await Promise.all(Array.from({ length: 5 }, freePort));
    const compose = parse(readFileSync(join(ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true }) as {
      services: Record<string, Record<string, unknown> & { environment?: Record<string, string> }>;
      volumes?: unknown;
    };
    t.same(Object.keys(compose.services).sort(), [
      'api',
      'createbucket',
      'migrate',
      'postgres',
      'redis',
      's3',
      'worker',
    ]);
    t.same(compose.services.api.depends_on, {
      migrate: { condition: 'service_completed_successfully' },
      createbucket: { condition: 'service_completed_successfully' },
      redis: { condition: 'service_healthy' },
    });
    for (const name of ['postgres', 'redis', 's3'])
      t.ok(compose.services[name].healthcheck, `${name} has a healthcheck`);

    // The same stack on this machine: the host's network on loopback ports, and stand-ins for the
    // registry's images (Debian's PostgreSQL and Redis, s3rver; the service's own image, which has the
    // AWS SDK, creates the bucket in place of the AWS CLI).
    const services = compose.services;
    for (const service of Object.values(services)) {
      service.network_mode = 'host';
      delete service.ports;
      delete service.build;
    }
    Object.assign(services.postgres, {
      image: standIn,
      entrypoint: ['/bin/bash', '-c'],
      command: [
        [
          'set -e',
          'mkdir -p /tmp/pg && chown postgres /tmp/pg',
          'runuser -u postgres -- initdb -D /tmp/pg/data -U postgres --auth=trust >/dev/null',
          `runuser -u postgres -- postgres -D /tmp/pg/data -k /tmp/pg -c listen_addresses=127.0.0.1 -p ${pgPort} & pid=$!`,
          `until pg_isready -q -h 127.0.0.1 -p ${pgPort}; do sleep 0.2; done`,
          `psql -q -h 127.0.0.1 -p ${pgPort} -U postgres -c "CREATE ROLE imagegen LOGIN PASSWORD '$POSTGRES_PASSWORD'" -c 'CREATE DATABASE imagegen OWNER imagegen'`,
          'wait $pid',
        ].join('\n'),
      ],
      healthcheck: {
        ...(services.postgres.healthcheck as object),
        test: ['CMD', 'pg_isready', '-h', '127.0.0.1', '-p', String(pgPort), '-U', 'imagegen', '-d', 'imagegen'],
      },
    });
    delete services.postgres.volumes;
    Object.assign(services.redis, {
      image: standIn,
      command: ['redis-server', '--bind', '127.0.0.1', '--port', String(redisPort), '--save', '', '--appendonly', 'no'],
      healthcheck: {
        ...(services.redis.healthcheck as object),
        test: ['CMD', 'redis-cli', '-p', String(redisPort), 'ping'],
      },
    });
    Object.assign(services.s3, {
      image: standIn,
      entrypoint: ['s3rver'],
      command: ['-d', '/tmp', '-a', '127.0.0.1', '-p', String(s3Port), '--no-vhost-buckets'],
      healthcheck: {
        ...(services.s3.healthcheck as object),
        test: ['CMD', 'curl', '-sS', '-o', '/dev/null', `http://127.0.0.1:${s3Port}/`],
      },
    });
    delete services.s3.volumes;
    Object.assign(services.createbucket, {
      image,
      entrypoint: ['node', '--input-type=module', '-e'],
      command: [
        "import { S3Client, CreateBucketCommand } from '@aws-sdk/client-s3';" +
          `const s3 = new S3Client({ endpoint: 'http://127.0.0.1:${s3Port}', forcePathStyle: true, region: 'us-east-1' });` +
          'await s3.send(new CreateBucketCommand({ Bucket: process.env.BUCKET }));',
      ],
    });
    const local = (value: string) =>
      value
        .replace('@postgres:5432/', `@127.0.0.1:${pgPort}/`)
        .replace('redis://redis:6379', `redis://127.0.0.1:${redisPort}`)
        .replace('http://s3:8333', `http://127.0.0.1:${s3Port}`);
    for (const role of ['migrate', 'api', 'worker']) {
      const service = services[role];
      service.image = image;
      const environment = Object.fromEntries(
        Object.entries(service.environment ?? {}).map(([k, v]) => [k, local(String(v))]),
      );
      service.environment = {
        ...environment,
        HOST: '127.0.0.1',
        PORT: String(apiPort),
        WORKER_METRICS_PORT: String(metricsPort),
        PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}`,
      };
    }
    delete compose.volumes;
    const file = join(dir, 'compose.yaml');
    // YAML 1.1, as podman-compose's PyYAML reads it: `no` and `yes` stay strings.
    writeFileSync(file, stringify(compose, { version: '1.1' }));
    const project = names('compose');
    const composeEnv = { S3_ACCESS_KEY: 'S3RVER', S3_SECRET_KEY: 'S3RVER', WORKER_REPLICAS: '2' };
    const compose_ = (args: string[]) =>
      run(
        'env',
        [
          ...Object.entries(composeEnv).map(([k, v]) => `${k}=${v}`),
          '/usr/bin/python3',
          join(ROOT, 'test/deploy/podman-compose-host.py'),
          '-p',
          project,
          '-f',
          file,
          ...args,
        ],
        {
          timeoutMs: 300_000,
        },
      );
    t.teardown(() => compose_(['down', '-t', '5']));

    // podman-compose 1.0.3 (Debian's) starts services in order but waits for no condition: the test
    // waits for what depends_on says.
    const started = Date.now();
    const infra = await compose_(['up', '-d', 'postgres', 'redis', 's3']);
    t.equal(infra.code, 0, infra.code === 0 ? 'postgres, redis and s3 started' : infra.stderr.slice(-1000));
    for (const name of ['postgres', 'redis', 's3']) {
      const container = `${project}_${name}_1`;
      let healthy = false;
      for (let i = 0; i < 120 && !healthy; i++) {
        healthy = (await run('podman', ['healthcheck', 'run', container])).code === 0;
        if (!healthy) await sleep(500);
      }
      t.ok(healthy, `${name} healthy`);
    }
    // The rest of the stack; the services already up stay as they are (podman-compose says their
    // names are taken, and goes on).
    await compose_(['up', '-d']);
    t.equal(await waitExit(`${project}_createbucket_1`), 0, 'createbucket completed');
    t.equal(await waitExit(`${project}_migrate_1`), 0, 'migrate completed');
    const base = `http://127.0.0.1:${apiPort}`;
    await waitHttp(`${base}/readyz`);
    t.comment(`compose stack up in ${Math.round((Date.now() - started) / 1000)} s`);
    const workers = (await podman(['ps', '--format', '{{.Names}}', '--filter', `name=${project}_worker`]))
      .trim()
      .split('\n');
    t.equal(workers.length, 2, 'two workers');

    const keys = await podman([
      'exec',
      `${project}_api_1`,
      'imagegen',
      'keys',
      'create',
      '--name',
      'compose',
      '--tokens',
      '1000',
    ]);
    const key = keys.trim().split('\n').pop()!;
    await createCompleteDownload(t, base, key, 'beta-v5-pro');
    const ready = (await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, string> };
    t.same(
      ready.checks,
      { store: 'ok', blobs: 'ok', disk: 'ok', rate_limits: 'ok' },
      'PostgreSQL, S3 and Redis in use',
    );
  },
);
