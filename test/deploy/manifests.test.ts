import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { Registry } from 'prom-client';
import t from 'tap';
import { parse } from 'yaml';
import { ConfigSchema, loadConfig } from '../../src/config.js';
import { buildWorkerMetricsApp } from '../../src/http/worker-metrics-app.js';
import { clusterDatabase } from '../helpers/processes.js';
import { kubernetesDir, podContainers, podSpec, renderKustomization } from '../helpers/kustomize.js';
import { needsStore } from '../helpers/store.js';

/**
 * deploy/kubernetes (docs/deploy.md) as `kubectl apply -k` would send it: every object valid
 * against the Kubernetes API's schemas (kubernetes-models) and KEDA's (@kubernetes-models/keda),
 * and every reference between them, to the image and to the service's configuration, resolved.
 * No cluster runs here; test/deploy/containers.test.ts runs the Deployments with `podman kube play`.
 */

const ROOT = join(kubernetesDir, '../..');
const objects = renderKustomization(kubernetesDir);
const byKind = (kind: string) => objects.filter((o) => o.kind === kind);
const named = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);

/** Variables an image's process reads besides the service's own: the AWS SDK's credentials. */
const SDK_VARIABLES = new Set(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']);

function modelModule(apiVersion: string): string {
  if (apiVersion === 'v1') return 'kubernetes-models/v1';
  if (apiVersion.startsWith('keda.sh/')) return `@kubernetes-models/keda/${apiVersion}`;
  return `kubernetes-models/${apiVersion}`;
}

t.test('every object is valid against its API schema', async (t) => {
  t.same(objects.map((o) => o.kind).sort(), [
    'ConfigMap',
    'Deployment',
    'Deployment',
    'HorizontalPodAutoscaler',
    'Job',
    'PodDisruptionBudget',
    'PodDisruptionBudget',
    'ScaledObject',
    'Secret',
    'Service',
  ]);
  for (const object of objects) {
    const module = (await import(modelModule(object.apiVersion))) as Record<
      string,
      new (
        data: unknown,
      ) => { validate(): void }
    >;
    const Model = module[object.kind];
    t.ok(Model, `${object.apiVersion} ${object.kind} has a schema`);
    t.doesNotThrow(() => new Model(object).validate(), `${object.kind}/${object.metadata.name}`);
  }
});

t.test('selectors match the labels of the pods they mean', async (t) => {
  const [api, worker] = ['imagegen-api', 'imagegen-worker'].map((name) => named('Deployment', name)!);
  const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  for (const deployment of [api, worker]) {
    t.ok(
      matches(deployment.spec.selector.matchLabels, deployment.spec.template.metadata.labels),
      deployment.metadata.name,
    );
  }
  const others = (selector: Record<string, string>) =>
    byKind('Deployment').filter((d) => matches(selector, d.spec.template.metadata.labels));
  t.same(others(named('Service', 'imagegen-api')!.spec.selector), [api], 'the Service selects the api pods alone');
  t.same(others(named('PodDisruptionBudget', 'imagegen-api')!.spec.selector.matchLabels), [api]);
  t.same(others(named('PodDisruptionBudget', 'imagegen-worker')!.spec.selector.matchLabels), [worker]);
  const hpa = byKind('HorizontalPodAutoscaler')[0];
  t.equal(hpa.spec.scaleTargetRef.name, api.metadata.name);
  const scaled = byKind('ScaledObject')[0];
  t.equal(scaled.spec.scaleTargetRef.name, worker.metadata.name);
  t.notOk(api.spec.replicas, 'the HorizontalPodAutoscaler owns the api replicas');
  t.notOk(worker.spec.replicas, 'KEDA owns the worker replicas');
});

t.test('ConfigMap and Secret names resolve, and their keys are variables of the configuration', async (t) => {
  const env: Record<string, string> = {};
  for (const container of objects.flatMap(podContainers)) {
    for (const from of container.envFrom ?? []) {
      const source = from.configMapRef
        ? named('ConfigMap', from.configMapRef.name)
        : named('Secret', from.secretRef?.name);
      t.ok(source, `${container.name}: ${JSON.stringify(from)} resolves`);
      Object.assign(env, source?.data ?? {}, source?.stringData ?? {});
    }
    for (const variable of container.env ?? []) env[variable.name] = variable.value ?? '';
  }
  for (const name of Object.keys(env))
    t.ok(name in ConfigSchema.properties || SDK_VARIABLES.has(name), `${name} is a configuration variable`);
  // The values themselves pass the service's own validation, as a pod's process would check them.
  t.doesNotThrow(() => loadConfig(env), 'the configuration loads');
  const config = loadConfig(env);
  t.equal(config.HOST, '0.0.0.0', 'listens on the pod network');
  t.equal(config.DATA_DIR, '/data');

  const api = podContainers(named('Deployment', 'imagegen-api')!)[0];
  const worker = podContainers(named('Deployment', 'imagegen-worker')!)[0];
  t.same(api.args, ['api']);
  t.same(worker.args, ['worker']);
  t.same(podContainers(byKind('Job')[0])[0].args, ['migrate']);
  t.equal(api.ports.find((p: { name: string }) => p.name === 'http').containerPort, config.PORT);
  t.equal(worker.ports.find((p: { name: string }) => p.name === 'metrics').containerPort, config.WORKER_METRICS_PORT);

  // KEDA reads the connection from the workers' own environment, and scales on one worker's slots.
  const trigger = byKind('ScaledObject')[0].spec.triggers[0];
  t.equal(trigger.type, 'postgresql');
  t.ok(trigger.metadata.connectionFromEnv in env);
  t.equal(Number(trigger.metadata.targetQueryValue), config.WORKER_CONCURRENCY);

  for (const deployment of byKind('Deployment')) {
    const grace = podSpec(deployment).terminationGracePeriodSeconds * 1000;
    t.ok(
      grace > config.SHUTDOWN_GRACE_MS + 5000,
      `${deployment.metadata.name}: termination grace ${grace} ms above the drain`,
    );
  }
});

t.test('probes name routes and ports that exist', async (t) => {
  const openapi = parse(readFileSync(join(ROOT, 'openapi.yaml'), 'utf8')) as { paths: Record<string, unknown> };
  const workerApp = buildWorkerMetricsApp(new Registry());
  t.teardown(() => workerApp.close());
  for (const deployment of byKind('Deployment')) {
    for (const container of podContainers(deployment)) {
      const portNames = new Set(container.ports.map((p: { name: string }) => p.name));
      for (const kind of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        const probe = container[kind];
        t.ok(probe?.httpGet, `${container.name}: ${kind}`);
        t.ok(portNames.has(probe.httpGet.port), `${container.name}: ${kind} port ${probe.httpGet.port}`);
        if (container.name === 'api') t.ok(probe.httpGet.path in openapi.paths, `api serves ${probe.httpGet.path}`);
        else
          t.equal(
            (await workerApp.inject({ url: probe.httpGet.path })).statusCode,
            200,
            `worker serves ${probe.httpGet.path}`,
          );
      }
      t.equal(container.readinessProbe.httpGet.path, '/readyz');
    }
  }
});

t.test('every pod runs unprivileged, read-only, with requests and limits', async (t) => {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const imageUser = Number(/^USER (\d+)/m.exec(dockerfile)?.[1]);
  for (const object of objects.filter((o) => podSpec(o))) {
    const spec = podSpec(object);
    const name = object.metadata.name;
    t.equal(spec.securityContext.runAsNonRoot, true, `${name}: runAsNonRoot`);
    t.equal(spec.securityContext.runAsUser, imageUser, `${name}: the image's own user`);
    t.equal(spec.automountServiceAccountToken, false, `${name}: no API token`);
    for (const container of podContainers(object)) {
      const security = container.securityContext;
      t.equal(security.readOnlyRootFilesystem, true, `${name}: read-only root`);
      t.equal(security.allowPrivilegeEscalation, false, `${name}: no privilege escalation`);
      t.same(security.capabilities.drop, ['ALL'], `${name}: capabilities dropped`);
      t.ok(container.resources.requests.cpu && container.resources.requests.memory, `${name}: requests`);
      t.ok(container.resources.limits.memory, `${name}: a memory limit`);
      const mounts = new Set(container.volumeMounts.map((m: { mountPath: string }) => m.mountPath));
      t.ok(mounts.has('/data') && mounts.has('/tmp'), `${name}: writable /data and /tmp`);
      const volumes = new Set(spec.volumes.map((v: { name: string }) => v.name));
      for (const mount of container.volumeMounts) t.ok(volumes.has(mount.name), `${name}: volume ${mount.name}`);
    }
  }
});

t.test("the ScaledObject's query runs on the service's schema", await needsStore('postgres'), async (t) => {
  const { url } = await clusterDatabase(t);
  const query = byKind('ScaledObject')[0].spec.triggers[0].metadata.query as string;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  const { rows } = await client.query<{ count: string }>(query);
  t.equal(Number(rows[0].count), 0, 'an empty queue counts 0');
});
