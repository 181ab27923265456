import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The TypeScript types of the client, as a user makes them: openapi-typescript's command line with
 * its defaults over the document at `documentPath`. Returns the text of the generated schema.d.ts.
 */
export function generateClientTypes(documentPath: string): string {
  const require = createRequire(import.meta.url);
  const cli = join(dirname(require.resolve('openapi-typescript/package.json')), 'bin', 'cli.js');
  const dir = mkdtempSync(join(tmpdir(), 'imagegen-client-types-'));
  try {
    const output = join(dir, 'schema.d.ts');
    execFileSync(process.execPath, [cli, documentPath, '--output', output], { stdio: ['ignore', 'ignore', 'pipe'] });
    return readFileSync(output, 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
