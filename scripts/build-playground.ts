/**
 * Builds the Playground (decision 0020) into dist/playground: playground/main.ts and the typed
 * client it imports bundled by esbuild into one ES module for the browser, next to the page and
 * its styles. `npm run build` and `npm start` run it after tsc; tests build into a directory of
 * their own.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SOURCE = join(ROOT, 'playground');

export async function buildPlayground(outDir = join(ROOT, 'dist', 'playground')): Promise<string> {
  await mkdir(outDir, { recursive: true });
  await build({
    entryPoints: [join(SOURCE, 'main.ts')],
    outfile: join(outDir, 'playground.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  await copyFile(join(SOURCE, 'index.html'), join(outDir, 'index.html'));
  await copyFile(join(SOURCE, 'playground.css'), join(outDir, 'playground.css'));
  await copyFile(join(SOURCE, 'favicon.svg'), join(outDir, 'favicon.svg'));
  return outDir;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const outDir = await buildPlayground();
  console.log(`Playground built into ${outDir}`);
}
