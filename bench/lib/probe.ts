import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '../../src/store/port.js';
import { REPO_ROOT } from './processes.js';

/**
 * For a store probe (bench/*-probe.ts): runs `probe` on every built checkout named on the command
 * line and then on this one, round after round, so that a before and an after alternate.
 */
export async function runProbeRounds(rounds: number, probe: (root: string) => Promise<string>): Promise<void> {
  const roots = [...process.argv.slice(2), REPO_ROOT];
  for (let round = 1; round <= rounds; round++) {
    for (const root of roots) console.log(`round ${round} ${root === REPO_ROOT ? 'this checkout' : root}: ${await probe(root)}`);
  }
}

/** A store of the checkout at root, on a new file in a temporary directory that is removed after `use`. */
export async function withProbeStore<T>(root: string, options: object, use: (store: Store, file: string) => Promise<T>): Promise<T> {
  const { SqliteStore } = (await import(join(root, 'dist/src/store/sqlite/sqlite-store.js'))) as { SqliteStore: new (path: string, options: object) => Store };
  const dir = mkdtempSync(join(tmpdir(), 'store-probe-'));
  const file = join(dir, 'imagegen.sqlite');
  const store = new SqliteStore(file, options);
  try {
    await store.migrate();
    return await use(store, file);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
