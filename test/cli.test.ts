import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { ConfigSchema } from '../src/config.js';
import { freePort, nodeCommand, spawnTsChild, waitForOutput } from './helpers/processes.js';

const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const run = promisify(execFile);

function runCli(dataDir: string, args: string[]) {
  return run(...nodeCommand(['--import', 'tsx', cli, ...args]), {
    env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent' },
  });
}

/**
 * The install of the first test: served once on its first start (which made the development
 * account), then started again by the last test, as an operator restarts it.
 */
const install = t.testdir({});

t.test(
  'serve on an empty install prints a development key, serves /docs and the API, and exits 0 on SIGTERM',
  async (t) => {
    const dataDir = install;
    const port = await freePort();
    const child = spawnTsChild(t, cli, ['serve'], {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '1',
    });
    const stdout = await waitForOutput(child, 'API docs:');
    const key = /(igk_[A-Za-z0-9_-]{43})/.exec(stdout)?.[1];
    t.ok(key, 'the development key is printed');
    t.match(
      stdout,
      /curl -s -X POST http:\/\/127\.0\.0\.1:\d+\/api\/v1\/images\/generations/,
      'with a ready-to-paste curl example',
    );

    const base = `http://127.0.0.1:${port}`;
    // The banner is printed before listen; wait for the socket (bounded).
    let docs: Response | undefined;
    for (let i = 0; i < 100 && !docs; i++) {
      docs = await fetch(`${base}/docs/`).catch(() => undefined);
      if (!docs) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.equal(docs?.status, 200, '/docs is served');
    const created = await fetch(`${base}/api/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-pro', prompt: 'a lighthouse at dawn' }),
    });
    t.equal(created.status, 202);
    const { data } = (await created.json()) as { data: { task_id: string } };
    const done = await fetch(`${base}/api/v1/images/generations/${data.task_id}?wait=30`, {
      headers: { authorization: `Bearer ${key}` },
    });
    t.equal(
      ((await done.json()) as { data: { status: string } }).data.status,
      'COMPLETED',
      'the in-process worker ran it',
    );

    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    t.equal(code, 0, 'graceful shutdown exits 0');
  },
);

t.test(
  'keys create prints the key alone on the last line; list never shows it; revoke and tokens grant work',
  async (t) => {
    const dataDir = t.testdir({});
    const created = await runCli(dataDir, ['keys', 'create', '--name', 'alice', '--tokens', '500']);
    const lines = created.stdout.trim().split('\n');
    const key = lines[lines.length - 1];
    t.match(key, /^igk_[A-Za-z0-9_-]{43}$/);
    const accountId = /Account (\S+)/.exec(created.stdout)?.[1];
    t.ok(accountId);

    const listed = await runCli(dataDir, ['keys', 'list']);
    t.notMatch(listed.stdout, key, 'the key is never listed');
    t.match(listed.stdout, key.slice(0, 12), 'its prefix is');

    const granted = await runCli(dataDir, ['tokens', 'grant', '--account', accountId!, '--tokens', '250']);
    t.match(granted.stdout, /balance 750/);

    const second = await runCli(dataDir, ['keys', 'create', '--account', accountId!, '--name', 'ci']);
    t.match(second.stdout.trim().split('\n').pop(), /^igk_/);

    const revoked = await runCli(dataDir, ['keys', 'revoke', key.slice(0, 12)]);
    t.match(revoked.stdout, /Revoked/);
    const relisted = await runCli(dataDir, ['keys', 'list', '--account', accountId!]);
    t.match(relisted.stdout, /\d{4}-\d\d-\d\dT[^\t]*\t?\s*$/m, 'the revoked key shows its revocation time');
  },
);

t.test('a bad configuration value stops the CLI naming the variable', async (t) => {
  const dataDir = t.testdir({});
  const failure = await run(...nodeCommand(['--import', 'tsx', cli, 'migrate']), {
    env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty' },
  }).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  t.equal(failure?.code, 1, 'exits 1');
  t.match(failure?.stderr, /Invalid environment variable PORT="eighty"/);
});

t.test(
  'config lists every variable with its default and description, without a valid environment or a store',
  async (t) => {
    const dataDir = join(t.testdir({}), 'not-created');
    // An environment no other command would start with: config reads only the schema.
    const { stdout } = await run(...nodeCommand(['--import', 'tsx', cli, 'config']), {
      env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty', DATABASE_URL: 'postgres://127.0.0.1:1/none' },
    });
    const lines = stdout.trimEnd().split('\n');
    t.match(lines[0], /^VARIABLE\s+DEFAULT\s+DESCRIPTION$/);
    for (const [name, schema] of Object.entries(ConfigSchema.properties)) {
      const line = lines.find((l) => l.split(/\s+/)[0] === name);
      t.ok(line, `${name} is listed`);
      if (schema.default !== undefined && schema.default !== '')
        t.equal(line?.split(/\s{2,}/)[1], String(schema.default), `${name}'s default`);
      if (schema.description) t.ok(line?.endsWith(schema.description), `${name}'s description`);
    }
    t.match(stdout, /^ALPHA_PRO_BACKEND\s+local\s+Which generator serves alpha-pro: local/m, 'a variable per model');
    t.match(stdout, /^BETA_V5_PRO_UPSTREAM_MODEL\s+-\s+The provider's model that serves beta-v5-pro;/m);
    t.match(stdout, /^S3_PREFIX\s+""\s+Prefix/m, 'an empty default is shown as ""');
    t.match(stdout, /^LOG_LEVEL\s+info\s+One of fatal, error, warn, info, debug, trace, silent\.$/m);
    t.notOk(existsSync(dataDir), 'the store was not opened (DATA_DIR not created)');
  },
);

t.test('models prints the price table of the catalog, without a valid environment or a store', async (t) => {
  const dataDir = join(t.testdir({}), 'not-created');
  const { stdout } = await run(...nodeCommand(['--import', 'tsx', cli, 'models']), {
    env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty' },
  });
  const lines = stdout.trimEnd().split('\n');
  t.match(lines[0], /^MODEL\s+TOKENS PER IMAGE\s+DEFAULT\s+ASPECT RATIOS\s+IMAGE REFERENCES\s+PROMPT LENGTH$/);
  t.same(
    lines.slice(1).map((line) => line.split(/\s{2,}/)),
    [
      [
        'alpha-pro',
        '1K 25, 2K 25, 4K 50',
        '1K, 1:1',
        '1:1 2:3 3:2 3:4 4:3 4:5 5:4 9:16 16:9 21:9',
        '1-8 (or none)',
        '3-10000',
      ],
      ['beta-v5-pro', '1K 25, 2K 50', '1K, 1:1', '1:1 4:3 3:4 16:9 9:16 2:3 3:2 21:9', '1-10 (or none)', '3-5000'],
    ],
  );
  const columns = lines.map((line) => line.indexOf(line.split(/\s{2,}/)[1]));
  t.equal(new Set(columns).size, 1, 'the columns are aligned');
  t.notOk(existsSync(dataDir), 'the store was not opened (DATA_DIR not created)');
});

t.test('the .env of the working directory is read, and the environment wins over it', async (t) => {
  const dir = t.testdir({ '.env': '# the service\nPORT="eighty"\n' });
  const tsx = import.meta.resolve('tsx');
  const migrate = (env: NodeJS.ProcessEnv) =>
    run(...nodeCommand(['--import', tsx, cli, 'migrate']), { cwd: dir, env: { ...env, DATA_DIR: dir } }).then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
  const { PORT: _, ...withoutPort } = process.env;
  const failure = await migrate(withoutPort);
  t.equal(failure?.code, 1, 'the value from .env is validated');
  t.match(failure?.stderr, /Invalid environment variable PORT="eighty"/);
  t.equal(await migrate({ ...withoutPort, PORT: '3000' }), null, 'PORT from the environment is used');
});

t.test('an unreachable REDIS_URL stops api naming the variable, without a stack trace', async (t) => {
  const dataDir = t.testdir({});
  const env = { ...process.env, DATA_DIR: dataDir, PORT: String(await freePort()), REDIS_URL: 'redis://127.0.0.1:1' };
  const failure = await run(...nodeCommand(['--import', 'tsx', cli, 'api']), { env }).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  t.equal(failure?.code, 1, 'exits 1');
  t.match(failure?.stderr, /^REDIS_URL: cannot connect to Redis/m);
  t.notMatch(failure?.stderr, /\n\s+at /, 'no stack trace');
});

t.test('a model backend without its key stops the CLI naming the missing variable', async (t) => {
  const dataDir = t.testdir({});
  const env = { ...process.env, DATA_DIR: dataDir, ALPHA_PRO_BACKEND: 'gemini', GEMINI_API_KEY: '' };
  const failure = await run(...nodeCommand(['--import', 'tsx', cli, 'migrate']), { env }).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  t.equal(failure?.code, 1, 'exits 1');
  t.match(failure?.stderr, /Missing environment variable GEMINI_API_KEY: ALPHA_PRO_BACKEND=gemini needs it/);
});

t.test(
  'serve on an install that has accounts prints no key but how to make another one with its DATA_DIR',
  async (t) => {
    // The first test's install, which has its development account.
    const dataDir = install;
    const port = await freePort();
    const child = spawnTsChild(t, cli, ['serve'], {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '0',
    });
    const stdout = await waitForOutput(child, 'API docs:');
    t.notMatch(stdout, /igk_/, 'no key is printed');
    t.match(
      stdout,
      `DATA_DIR=${dataDir} npm run cli -- keys create --name NAME --tokens 1000`,
      'the command for another key names the DATA_DIR',
    );
    // The hint is printed before listen; SIGTERM is handled once the server listens (bounded wait).
    let health: Response | undefined;
    for (let i = 0; i < 100 && !health; i++) {
      health = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
      if (!health) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    t.equal(health?.status, 200, 'it serves');
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    t.equal(code, 0);
  },
);
