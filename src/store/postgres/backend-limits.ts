import {
  admitsCall,
  afterUpstreamCall,
  initialBackendLimit,
  type BackendLimitSettings,
  type BackendLimitState,
  type BackendLoad,
} from '../../core/backend-capacity.js';
import type { BackendLimitStore } from '../port.js';
import type { PostgresDatabase, Tx } from './postgres-database.js';
import { CLAIM } from '../../core/task-execution.js';

/**
 * The backend's state under its row lock, made from the settings on first use. Every claim of the
 * backend's tasks and every recorded outcome takes this lock first, so that the cluster's claims
 * of one backend see each other's tasks in progress (the limit holds for all processes together).
 */
async function lockedStateOf(tx: Tx, backend: string, settings: BackendLimitSettings): Promise<BackendLimitState> {
  await tx.query(
    `INSERT INTO backend_limits (backend, state, updated_at) VALUES ($1, $2, now()) ON CONFLICT (backend) DO NOTHING`,
    [backend, JSON.stringify(initialBackendLimit(settings))],
  );
  const { rows } = await tx.query<{ state: BackendLimitState }>(
    'SELECT state FROM backend_limits WHERE backend = $1 FOR UPDATE',
    [backend],
  );
  return rows[0].state;
}

async function loadOf(tx: Tx, models: readonly string[], now: Date): Promise<BackendLoad> {
  const { rows } = await tx.query<{ in_flight: number; waiting: boolean }>(
    `SELECT (SELECT count(*) FROM tasks WHERE status = $4 AND calling AND model = ANY($1::text[])) AS in_flight,
            EXISTS (SELECT 1 FROM tasks WHERE status = $3 AND run_after <= $2 AND model = ANY($1::text[])) AS waiting`,
    [models, now, CLAIM.from, CLAIM.to],
  );
  return { inFlight: rows[0].in_flight, waiting: rows[0].waiting };
}

/** In a claim's transaction: whether the backend has room for one more call now (its row stays locked). */
export async function backendAdmitsCallIn(
  tx: Tx,
  limit: { backend: string; settings: BackendLimitSettings },
  models: readonly string[],
  now: Date,
): Promise<boolean> {
  const state = await lockedStateOf(tx, limit.backend, limit.settings);
  return admitsCall(state, (await loadOf(tx, models, now)).inFlight, now.getTime());
}

/** The backends' shared limits on PostgreSQL, for every process of the cluster. */
export class PostgresBackendLimits implements BackendLimitStore {
  constructor(private readonly db: PostgresDatabase) {}

  recordUpstreamCall(input: Parameters<BackendLimitStore['recordUpstreamCall']>[0]): Promise<BackendLimitState> {
    return this.db.transaction(
      async (tx) => {
        const state = await lockedStateOf(tx, input.backend, input.settings);
        const load = await loadOf(tx, input.models, input.now);
        const next = afterUpstreamCall(state, input.outcome, load, input.now.getTime(), input.settings);
        await tx.query('UPDATE tasks SET calling = false WHERE id = $1 AND attempt = $2 AND status = $3', [
          input.task.id,
          input.task.attempt,
          CLAIM.to,
        ]);
        await tx.query('UPDATE backend_limits SET state = $2, updated_at = $3 WHERE backend = $1', [
          input.backend,
          JSON.stringify(next),
          input.now,
        ]);
        return next;
      },
      { unsynced: true },
    );
  }

  async backendLimits(): Promise<Map<string, BackendLimitState>> {
    const { rows } = await this.db.query<{ backend: string; state: BackendLimitState }>(
      'SELECT backend, state FROM backend_limits',
    );
    return new Map(rows.map((r) => [r.backend, r.state]));
  }

  async countQueuedTasks(): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ model: string; queued: number }>(
      'SELECT model, count(*) AS queued FROM tasks WHERE status = $1 GROUP BY model',
      [CLAIM.from],
    );
    return new Map(rows.map((r) => [r.model, r.queued]));
  }
}
