import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';

const root = new URL('../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
const run = promisify(execFile);

t.test('npm refuses an older Node.js at once: engines with engine-strict, and devEngines for npm run', async (t) => {
  t.equal(pkg.engines.node, '>=22.19.0', 'the floor the dependencies set (undici 8)');
  t.same(pkg.devEngines.runtime, { name: 'node', version: pkg.engines.node, onFail: 'error' });
  t.match(readFileSync(new URL('.npmrc', root), 'utf8'), /^engine-strict=true$/m);
});

t.test('scripts/with-node.sh refuses a line it does not provide, naming the ones it does', async (t) => {
  const script = fileURLToPath(new URL('scripts/with-node.sh', root));
  const failure = await run('bash', [script, '20', 'node', '--version']).then(
    () => null,
    (error: { code: number; stderr: string }) => error,
  );
  t.equal(failure?.code, 2);
  t.match(failure?.stderr, /supported Node\.js lines are 24 and 26 \(asked for '20'\)/);
});
