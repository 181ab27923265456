import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { buildTestApp } from './helpers/app.js';
import { nodeCommand } from './helpers/processes.js';

const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const run = promisify(execFile);

/**
 * `imagegen admin-keys create|list|revoke` (docs/design.md §3.11) on the store of an app built
 * for this test (its own: the CLI opens the same data directory), the key printed once on the last
 * line and taken by /admin/v1 at once.
 */
t.test('admin-keys create prints a key /admin takes; list never shows it; revoke ends it', async (t) => {
  const h = await buildTestApp(t);
  const cliRun = (args: string[]) =>
    run(...nodeCommand(['--import', 'tsx', cli, ...args]), {
      env: { ...process.env, ...h.storeEnv, DATA_DIR: h.dataDir, LOG_LEVEL: 'silent' },
    });
  const created = await cliRun(['admin-keys', 'create', '--name', 'ops']);
  const key = created.stdout.trim().split('\n').at(-1) ?? '';
  t.match(key, /^iga_[A-Za-z0-9_-]{43}$/, 'the key alone on the last line');
  const auth = { authorization: `Bearer ${key}` };
  t.equal((await h.app.inject({ url: '/admin/v1/accounts', headers: auth })).statusCode, 200);
  const listed = await cliRun(['admin-keys', 'list']);
  t.match(listed.stdout, /ops/);
  t.notMatch(listed.stdout, key.slice(12), 'never the key');
  await cliRun(['admin-keys', 'revoke', key.slice(0, 12)]);
  t.equal((await h.app.inject({ url: '/admin/v1/accounts', headers: auth })).statusCode, 401, 'revoked');
  await t.rejects(cliRun(['admin-keys', 'create']), 'a name is required');
});
