/**
 * Builds the browser pages, the Playground (decision 0020) and the console (decision 0037), each
 * into dist/<page>: <page>/main.ts with the typed client and what it imports from ui/ (Chart.js
 * among them) bundled by esbuild into one ES module, <page>/<page>.css with the shared
 * ui/base.css it imports bundled into one stylesheet, next to the page and the icon. `npm run
 * build` and `npm start` run it after tsc; tests build a page into a directory of their own.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { BUILT_PAGES, type BuiltPage } from '../src/http/routes/pages.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export async function buildPage(page: BuiltPage, outDir = join(ROOT, 'dist', page)): Promise<string> {
  const source = join(ROOT, page);
  await mkdir(outDir, { recursive: true });
  await build({
    entryPoints: [
      { in: join(source, 'main.ts'), out: page },
      { in: join(source, `${page}.css`), out: page },
    ],
    outdir: outDir,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  await copyFile(join(source, 'index.html'), join(outDir, 'index.html'));
  await copyFile(join(ROOT, 'ui', 'favicon.svg'), join(outDir, 'favicon.svg'));
  return outDir;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const page of BUILT_PAGES) console.log(`${page} built into ${await buildPage(page)}`);
}
