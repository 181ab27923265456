/**
 * How long the housekeeper's sweep of expired Idempotency-Keys holds the event loop: 100 000
 * expired keys (with stored 700-byte responses, as creates leave them) in a store with its
 * background checkpointer, as `serve` runs it, deleted through `deleteExpiredIdempotencyKeys` in
 * the housekeeper's slices of 1 000 until a slice comes back short. Reports each call's time.
 * Give built checkouts to compare them with this one (BENCHMARKS.md row 19).
 *
 *   npx tsx bench/key-sweep-probe.ts [/path/to/other/checkout …]
 */
import Database from 'better-sqlite3';
import { runProbeRounds, withProbeStore } from './lib/probe.js';

const KEYS = 100_000;
const SLICE = 1000;
const ROUNDS = 2;

async function sweepOnce(root: string): Promise<string> {
  return withProbeStore(root, { checkpointInBackground: { onCheckpointError: () => {} } }, async (store, file) => {
    const seed = new Database(file);
    const accountId = '0193c1f0-0000-7000-8000-000000000001';
    seed.prepare("INSERT INTO accounts (id, name, balance, created_at) VALUES (?, 'probe', 0, 0)").run(accountId);
    const insert = seed.prepare(
      `INSERT INTO idempotency_keys (account_id, key, fingerprint, status, response_status, response_headers, response_body, created_at, expires_at)
       VALUES (?, ?, 'fp', 'completed', 202, '{}', ?, 0, ?)`,
    );
    const body = Buffer.alloc(700, 'x');
    seed.transaction(() => {
      for (let i = 0; i < KEYS; i++) insert.run(accountId, `key-${i}`, body, 1000 + i);
    })();
    seed.close();

    const calls: number[] = [];
    for (let deleted = SLICE; deleted === SLICE; ) {
      // The old signature ignores the limit and deletes everything in its one call.
      const started = performance.now();
      deleted = await (store.deleteExpiredIdempotencyKeys as (now: Date, limit: number) => Promise<number>)(new Date(10_000_000), SLICE);
      calls.push(performance.now() - started);
    }
    const sorted = [...calls].sort((a, b) => a - b);
    const total = calls.reduce((a, b) => a + b, 0);
    return `${calls.length} calls, ${total.toFixed(0)} ms in all; median ${sorted[sorted.length >> 1].toFixed(1)} ms, longest ${sorted[sorted.length - 1].toFixed(1)} ms`;
  });
}

await runProbeRounds(ROUNDS, sweepOnce);
