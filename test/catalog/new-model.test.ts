import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { parse } from 'yaml';
import { freePort, nodeCommand, spawnTsChild, waitForOutput } from '../helpers/processes.js';

/**
 * "A new model is one module plus configuration" (docs/design.md §2, §7.3), checked the way a
 * developer would add one: in a copy of the project's sources, one new file under schemas/models/
 * and one entry in schemas/models/index.ts, nothing else; then the real service, the OpenAPI
 * document and the CLI, each run from that copy in a child process, all know the model.
 */
const root = resolve(new URL('../..', import.meta.url).pathname);
const run = promisify(execFile);
const tsx = import.meta.resolve('tsx');

const GAMMA_TEST_MODULE = `import { defineModelModule } from '../model-entry.js';

export const gammaTest = defineModelModule({
  id: 'gamma-test',
  description: 'A model added by a test, in a copy of the project.',
  promptLength: { min: 1, max: 2000 },
  imageReferenceCount: { min: 1, max: 2 },
  aspectRatios: ['1:1', '16:9', '9:16'],
  prices: { '1K': 7, '2K': 13 },
  defaults: { aspectRatio: '16:9', resolution: '1K' },
});
`;

/** The project's sources in a temporary directory, with gamma-test added as a developer would. */
function copyWithNewModel(): string {
  const copy = mkdtempSync(join(tmpdir(), 'imagegen-new-model-'));
  for (const dir of ['src', 'schemas', 'scripts']) cpSync(join(root, dir), join(copy, dir), { recursive: true });
  for (const file of ['package.json', 'tsconfig.json', 'tsconfig.check.json'])
    cpSync(join(root, file), join(copy, file));
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');

  writeFileSync(join(copy, 'schemas/models/gamma-test.ts'), GAMMA_TEST_MODULE);
  const listPath = join(copy, 'schemas/models/index.ts');
  const list = readFileSync(listPath, 'utf8');
  const withGamma = `import { gammaTest } from './gamma-test.js';\n${list.replace(/\] as const\b/, ', gammaTest] as const')}`;
  if (withGamma === `import { gammaTest } from './gamma-test.js';\n${list}`) throw new Error('no model list found');
  writeFileSync(listPath, withGamma);
  return copy;
}

/** A TypeScript entry point of the copy, run to its end; its stdout. */
async function runInCopy(copy: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  const { stdout } = await run(...nodeCommand(['--import', tsx, ...args]), {
    cwd: copy,
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
  });
  return stdout;
}

t.test(
  'a model added as one module and one line of the list is served, documented, priced and configurable',
  async (t) => {
    const copy = copyWithNewModel();
    t.teardown(() => rmSync(copy, { recursive: true, force: true }));
    const dataDir = join(copy, 'data');
    const port = await freePort();

    const server = spawnTsChild(t, join(copy, 'src/cli.ts'), ['serve'], {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '1',
      PLAYGROUND: 'false',
      CONSOLE: 'false',
    });
    // The one-shot children run while the server starts.
    const [banner, openApiYaml, priceTable, configHelp] = await Promise.all([
      waitForOutput(server, 'API docs:'),
      runInCopy(copy, [
        '--input-type=module',
        '--eval',
        "const { renderOpenApiYaml } = await import('./scripts/openapi-document.ts'); process.stdout.write(await renderOpenApiYaml());",
      ]),
      runInCopy(copy, ['src/cli.ts', 'models']),
      runInCopy(copy, ['src/cli.ts', 'config']),
    ]);

    await t.test('GET /api/v1/models lists it; a task on it is priced from its module and runs', async (t) => {
      const key = /(igk_[A-Za-z0-9_-]{43})/.exec(banner)?.[1];
      t.ok(key, 'the development key is printed');
      const base = `http://127.0.0.1:${port}/api/v1`;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      // The banner is printed before listen: wait for the socket (bounded).
      let models: Response | undefined;
      for (let i = 0; i < 100 && !models; i++) {
        models = await fetch(`${base}/models`, { headers }).catch(() => undefined);
        if (!models) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const list = (await models!.json()) as { data: { id: string; prices: object; aspect_ratios: string[] }[] };
      t.same(
        list.data.map((m) => m.id),
        ['alpha-pro', 'beta-v5-pro', 'gamma-test'],
        'in the order of the list',
      );
      const gamma = list.data.find((m) => m.id === 'gamma-test');
      t.same(gamma?.prices, { '1K': 7, '2K': 13 });
      t.same(gamma?.aspect_ratios, ['1:1', '16:9', '9:16']);

      const estimate = await fetch(`${base}/images/estimates`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'gamma-test', prompt: 'a lighthouse', parameters: { resolution: '2K' } }),
      });
      t.equal(estimate.status, 200);
      t.match(await estimate.json(), { data: { model: 'gamma-test', cost: 13, width: 2752, height: 1536 } });

      const refused = await fetch(`${base}/images/generations`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'gamma-test', prompt: 'a lighthouse', parameters: { aspect_ratio: '4:3' } }),
      });
      t.equal(refused.status, 400, 'a ratio the module does not offer is refused by its request schema');
      t.match(await refused.json(), {
        code: 'invalid_request',
        errors: [{ pointer: '/parameters/aspect_ratio', code: 'not_allowed' }],
      });

      const created = await fetch(`${base}/images/generations`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'gamma-test', prompt: 'a lighthouse' }),
      });
      t.equal(created.status, 202);
      const { data: task } = (await created.json()) as { data: { task_id: string; cost: number } };
      t.equal(task.cost, 7, "charged the module's 1K price (its default resolution)");
      const account = (await (await fetch(`${base}/account`, { headers })).json()) as { data: { balance: number } };
      t.equal(account.data.balance, 1000 - 7, 'and debited');
      const done = await fetch(`${base}/images/generations/${task.task_id}?wait=30`, { headers });
      t.match(await done.json(), { data: { status: 'COMPLETED' } }, 'the local backend (its default) ran it');

      server.kill('SIGTERM');
      const [code] = await once(server, 'exit');
      t.equal(code, 0);
    });

    await t.test("the OpenAPI document has its request schema and its branch of the create body's oneOf", async (t) => {
      const document = parse(openApiYaml);
      const component = document.components.schemas.GenerationRequest_gamma_test;
      t.ok(component, 'GenerationRequest_gamma_test is a component');
      t.same(component.properties.model.enum, ['gamma-test']);
      t.same(component.properties.parameters.properties.aspect_ratio.enum, ['1:1', '16:9', '9:16']);
      t.same(component.properties.parameters.properties.resolution.enum, ['1K', '2K']);
      const body = document.paths['/api/v1/images/generations'].post.requestBody.content['application/json'].schema;
      t.equal(body.discriminator.mapping['gamma-test'], '#/components/schemas/GenerationRequest_gamma_test');
      t.ok(
        body.oneOf.some(
          (branch: { $ref: string }) => branch.$ref === '#/components/schemas/GenerationRequest_gamma_test',
        ),
        'a branch of oneOf',
      );
    });

    await t.test('imagegen models prints its prices; imagegen config its variables', async (t) => {
      t.match(priceTable, /^gamma-test\s+1K 7, 2K 13\s+1K, 16:9\s+1:1 16:9 9:16\s+1-2 \(or none\)\s+1-2000$/m);
      t.match(
        configHelp,
        /^GAMMA_TEST_BACKEND\s+local\s+Which generator serves gamma-test: local \(the preview renderer\), gemini or openai\.$/m,
      );
      t.match(configHelp, /^GAMMA_TEST_UPSTREAM_MODEL\s+-\s+The provider's model that serves gamma-test;/m);
    });
  },
);
