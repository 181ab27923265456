import {
  admitsCall,
  afterUpstreamCall,
  initialBackendLimit,
  type BackendLimitSettings,
  type BackendLimitState,
  type BackendLoad,
} from '../../core/backend-capacity.js';
import type { BackendLimitStore } from '../port.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { CLAIM } from '../../core/task-execution.js';

/** The `model IN (…)` condition over a list of models, with its parameters (placeholder: see unplanned-parameters). */
export function modelsCondition(
  models: readonly string[],
  column = 'model',
  placeholder: (positional: string) => string = (positional) => positional,
): { sql: string; params: string[] } {
  return models.length === 0
    ? { sql: '0', params: [] }
    : { sql: `${column} IN (${models.map(() => placeholder('?')).join(', ')})`, params: [...models] };
}

function stateOf(db: SqliteDatabase, backend: string, settings: BackendLimitSettings): BackendLimitState {
  const row = db.statement('SELECT state FROM backend_limits WHERE backend = ?').get(backend) as
    | { state: string }
    | undefined;
  return row ? (JSON.parse(row.state) as BackendLimitState) : initialBackendLimit(settings);
}

function loadOf(db: SqliteDatabase, models: readonly string[], now: number): BackendLoad {
  const { sql, params } = modelsCondition(models);
  const inFlight = db
    .statement(`SELECT count(*) FROM tasks WHERE status = ? AND calling = 1 AND ${sql}`)
    .pluck()
    .get(CLAIM.to, ...params) as number;
  const waiting =
    db
      .statement(`SELECT 1 FROM tasks WHERE status = ? AND run_after <= ? AND ${sql} LIMIT 1`)
      .get(CLAIM.from, now, ...params) !== undefined;
  return { inFlight, waiting };
}

/** In a claim's transaction: whether the backend has room for one more call now. */
export function backendAdmitsCallIn(
  db: SqliteDatabase,
  limit: { backend: string; settings: BackendLimitSettings },
  models: readonly string[],
  now: number,
): boolean {
  return admitsCall(stateOf(db, limit.backend, limit.settings), loadOf(db, models, now).inFlight, now);
}

/** The backends' shared limits on the embedded store (one writer at a time: no lock needed). */
export class SqliteBackendLimits implements BackendLimitStore {
  constructor(private readonly db: SqliteDatabase) {}

  async recordUpstreamCall(input: Parameters<BackendLimitStore['recordUpstreamCall']>[0]): Promise<BackendLimitState> {
    const now = input.now.getTime();
    return this.db.writeUnsynced(() => {
      const state = stateOf(this.db, input.backend, input.settings);
      const next = afterUpstreamCall(state, input.outcome, loadOf(this.db, input.models, now), now, input.settings);
      this.db
        .statement('UPDATE tasks SET calling = 0 WHERE id = ? AND attempt = ? AND status = ?')
        .run(input.task.id, input.task.attempt, CLAIM.to);
      this.db
        .statement(
          `INSERT INTO backend_limits (backend, state, updated_at) VALUES (?, ?, ?)
             ON CONFLICT (backend) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
        )
        .run(input.backend, JSON.stringify(next), now);
      return next;
    });
  }

  async backendLimits(): Promise<Map<string, BackendLimitState>> {
    const rows = this.db.statement('SELECT backend, state FROM backend_limits').all() as {
      backend: string;
      state: string;
    }[];
    return new Map(rows.map((r) => [r.backend, JSON.parse(r.state) as BackendLimitState]));
  }

  async countQueuedTasks(): Promise<Map<string, number>> {
    const rows = this.db
      .statement('SELECT model, count(*) AS queued FROM tasks WHERE status = ? GROUP BY model')
      .all(CLAIM.from) as { model: string; queued: number }[];
    return new Map(rows.map((r) => [r.model, r.queued]));
  }
}
