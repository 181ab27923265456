// Not in the PostgreSQL pass: reads the source files, runs no store.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

/**
 * The MCP layer writes no rule of money or tasks (decision 0026): its tools call the services the
 * REST routes call, and never the store. This fails when a file of the MCP module imports the
 * store port or an adapter.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MCP_FILES = [
  ...readdirSync(join(ROOT, 'src/mcp'))
    .filter((name) => name.endsWith('.ts'))
    .map((name) => `src/mcp/${name}`),
  'src/http/routes/mcp.ts',
];

/** The module specifiers a TypeScript file imports or re-exports, static and dynamic. */
export function importedSpecifiers(source: string): string[] {
  const specifiers: string[] = [];
  for (const match of source.matchAll(/\b(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g))
    specifiers.push(match[1]);
  for (const match of source.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) specifiers.push(match[1]);
  for (const match of source.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm)) specifiers.push(match[1]);
  return specifiers;
}

const reachesTheStore = (specifier: string) => /(^|\/)store(\/|\.js$|$)/.test(specifier);

t.test('the detector finds store imports in every form', async (t) => {
  const offending = [
    "import type { Store } from '../store/port.js';",
    "import { PostgresStore } from '../store/postgres/postgres-store.js';",
    "export { SqliteStore } from '../../store/sqlite/sqlite-store.js';",
    "const m = await import('../store/port.js');",
  ];
  for (const line of offending) t.ok(importedSpecifiers(line).some(reachesTheStore), line);
  const fine = "import { TaskService } from '../services/task-service.js';\nimport { restore } from './restore.js';";
  t.notOk(importedSpecifiers(fine).some(reachesTheStore), 'services and look-alike names pass');
});

t.test('no file of the MCP module imports the store', async (t) => {
  t.ok(MCP_FILES.length >= 4, `${MCP_FILES.length} files checked`);
  for (const file of MCP_FILES) {
    const imports = importedSpecifiers(readFileSync(join(ROOT, file), 'utf8'));
    t.ok(imports.length > 0, `${file} has imports`);
    t.same(imports.filter(reachesTheStore), [], `${file} does not import the store`);
  }
});
