import { TASK_STATUSES } from '../../../schemas/resources.js';
import { DomainError } from '../../core/errors.js';
import {
  afterLostLease,
  admitsAnotherActiveTask,
  claimOrder,
  countsAsActive,
  deadlineCutoff,
  DEADLINE_EXCEEDED,
  isPastDeadline,
  webhookEventFor,
} from '../../core/task-execution.js';
import {
  generatedMediaRef,
  nextStatus,
  refundsOnEntry,
  statusesAllowing,
  type GeneratedMediaRef,
  type TaskEvent,
  type TaskRecord,
  type TaskStatus,
} from '../../core/task.js';
import { uuidv7Floor } from '../../ids.js';
import { newestFirstKeyset, pageFetchSize, pageOf } from '../paging.js';
import type {
  ClaimPolicy,
  GeneratedMediaInput,
  IdempotencyCompletion,
  MediaRecord,
  Page,
  TaskCreationLimits,
  TaskExecutionStore,
  TaskListQuery,
  TaskStore,
} from '../port.js';
import { backendAdmitsCallIn, modelsCondition } from './backend-limits.js';
import { activeTasksOf, addLedgerEntry, countActiveTask, refundTaskIn } from './accounts.js';
import { completeIdempotencyKeyIn } from './idempotency-keys.js';
import { assertReferencesUsable, insertMediaIn } from './media.js';
import { fromTask, TASK_COLUMNS, toTask, type TaskRecordRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { enqueueWebhookEvent } from './webhooks.js';

/** The columns of a task record, by name: every read of a task goes through them and toTask. */
const TASK_SELECT = `SELECT ${TASK_COLUMNS.join(', ')} FROM tasks`;
/**
 * The models an account has tasks of, one index seek each (a skip scan of the
 * (account_id, model, status, id) index).
 */
const MODELS_OF_ACCOUNT = `
  WITH RECURSIVE listed(model) AS (
    SELECT (SELECT model FROM tasks WHERE account_id = @accountId ORDER BY model LIMIT 1)
    UNION ALL
    SELECT (SELECT model FROM tasks WHERE account_id = @accountId AND model > listed.model ORDER BY model LIMIT 1)
    FROM listed WHERE listed.model IS NOT NULL
  )
  SELECT model FROM listed WHERE model IS NOT NULL`;

/**
 * Tasks on the embedded store: their creation with its debit, their listing, and the tasks table as
 * a queue. Every write that finishes an attempt is fenced by the attempt number (see the port).
 */
export class SqliteTasks implements TaskStore, TaskExecutionStore {
  constructor(private readonly db: SqliteDatabase) {}

  async insertTaskWithDebit(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    return this.db.groupCommit(() => this.insertTask(task, limits, completesKey), { durable: true });
  }

  private insertTask(task: TaskRecord, limits: TaskCreationLimits, completesKey: IdempotencyCompletion | undefined) {
    assertReferencesUsable(this.db, task);
    const active = activeTasksOf(this.db, task.accountId);
    if (active !== undefined && !admitsAnotherActiveTask(active, limits.maxActiveTasks)) {
      throw new DomainError(
        'too_many_active_tasks',
        `An account may have at most ${limits.maxActiveTasks} active tasks.`,
      );
    }
    if (!addLedgerEntry(this.db, task.accountId, 'debit', task.cost, task.id, null, task.createdAt)) {
      throw new DomainError('insufficient_tokens', `This task costs ${task.cost} tokens; the balance is lower.`);
    }
    this.db
      .statement(
        `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, width, height,
           cost, webhook_url, generated, error_code, error_message, attempt, deferred_attempts, lease_expires_at, run_after, created_at, started_at, completed_at)
         VALUES (@id, @account_id, @status, @model, @prompt, @image_reference, @aspect_ratio, @resolution, @width, @height,
           @cost, @webhook_url, @generated, @error_code, @error_message, @attempt, @deferred_attempts, @lease_expires_at, @run_after, @created_at, @started_at, @completed_at)`,
      )
      .run(fromTask(task));
    if (completesKey && !completeIdempotencyKeyIn(this.db, completesKey)) {
      throw new DomainError(
        'idempotency_in_progress',
        'Another request with this Idempotency-Key took it over; retry shortly.',
      );
    }
    if (countsAsActive(task.status)) countActiveTask(this.db, task.accountId, 1);
  }

  /** The task where `condition` holds, read by its named columns. */
  private readTask(condition: string, ...params: unknown[]): TaskRecord | null {
    const row = this.db.statement(`${TASK_SELECT} WHERE ${condition}`).get(...params) as TaskRecordRow | undefined;
    return row ? toTask(row) : null;
  }

  async getTask(accountId: string, taskId: string): Promise<TaskRecord | null> {
    return this.readTask('id = ? AND account_id = ?', taskId, accountId);
  }

  async getTaskById(taskId: string): Promise<TaskRecord | null> {
    return this.readTask('id = ?', taskId);
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // The account's tasks are in one index, ordered (account_id, model, status, id) (migration 6):
    // a page is the newest of the merge of its (model, status) ranges, each read newest first and
    // only as far as the merge takes from it, so a page costs the same at any depth. Time bounds
    // become id bounds (UUIDv7 ids start with their creation millisecond).
    const { conditions, params } = newestFirstKeyset(accountId, query.cursor, {});
    if (query.createdBefore) {
      conditions.push('id < @createdBefore');
      params.createdBefore = uuidv7Floor(query.createdBefore);
    }
    if (query.createdAfter) {
      conditions.push('id >= @createdAfter');
      params.createdAfter = uuidv7Floor(new Date(query.createdAfter.getTime() + 1));
    }
    // Models are read from the index, not the catalog, so that a model the catalog no longer
    // offers still lists its tasks.
    const models = query.model
      ? [query.model]
      : (this.db.statement(MODELS_OF_ACCOUNT).pluck().all({ accountId }) as string[]);
    const statuses = query.status ? [query.status] : TASK_STATUSES;
    const where = conditions.join(' AND ');
    const ranges: string[] = [];
    for (const model of models) {
      for (const status of statuses) {
        const n = ranges.length;
        params[`model${n}`] = model;
        params[`status${n}`] = status;
        ranges.push(`${TASK_SELECT} WHERE ${where} AND model = @model${n} AND status = @status${n}`);
      }
    }
    if (ranges.length === 0) return { items: [], nextCursor: null };
    // The limit is written into the SQL: as a bound parameter it cost SQLite 2.5 times the whole
    // query (docs/performance-history.md, "Optimisations").
    const rows = this.db
      .listStatement(`${ranges.join(' UNION ALL ')} ORDER BY id DESC LIMIT ${pageFetchSize(query.limit)}`)
      .all(params) as TaskRecordRow[];
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.db.write(() => refundTaskIn(this.db, taskId, now));
  }

  async claimNextTask(policy: ClaimPolicy): Promise<TaskRecord | null> {
    const now = policy.now.getTime();
    return this.db.writeUnsynced(() => {
      const expired = this.db
        .statement(
          "SELECT id, attempt, deferred_attempts FROM tasks WHERE status = 'IN_PROGRESS' AND lease_expires_at < ?",
        )
        .all(now) as { id: string; attempt: number; deferred_attempts: number }[];
      for (const lost of expired) {
        const outcome = afterLostLease(
          { attempt: lost.attempt, deferredAttempts: lost.deferred_attempts },
          policy.maxAttempts,
        );
        if (outcome.action === 'fail') this.finish(lost.id, lost.attempt, 'fail', policy.now, { error: outcome.error });
        else this.requeue(lost.id, lost.attempt, now, false);
      }
      if (policy.sharedLimit && !backendAdmitsCallIn(this.db, policy.sharedLimit, policy.models ?? [], now))
        return null;

      for (;;) {
        const next = claimOrder(this.claimCandidates(policy.models, now))[0];
        if (!next) return null;
        if (isPastDeadline(new Date(next.createdAt), policy.now, policy.deadlineMs)) {
          this.finish(next.id, next.attempt, 'fail', policy.now, {
            error: DEADLINE_EXCEEDED,
            fromStatuses: ['CREATED'],
          });
          continue;
        }
        const claimed = this.db
          .statement(
            `UPDATE tasks SET status = 'IN_PROGRESS', attempt = attempt + 1, calling = 1, lease_expires_at = ?, started_at = coalesce(started_at, ?)
               WHERE id = ? RETURNING ${TASK_COLUMNS.join(', ')}`,
          )
          .get(now + policy.leaseMs, now, next.id) as TaskRecordRow;
        return toTask(claimed);
      }
    });
  }

  /**
   * Each account's oldest runnable task (of `models`), with the account's tasks in progress: one
   * seek per account with queued tasks (a skip scan of tasks_queue), one range each for the rest.
   */
  private claimCandidates(models: readonly string[] | undefined, now: number) {
    const ofModels = models ? modelsCondition(models) : { sql: '1', params: [] };
    const rows = this.db
      .statement(
        `WITH RECURSIVE queued(account_id) AS (
           SELECT (SELECT account_id FROM tasks WHERE status = 'CREATED' ORDER BY account_id LIMIT 1)
           UNION ALL
           SELECT (SELECT account_id FROM tasks WHERE status = 'CREATED' AND account_id > queued.account_id
                   ORDER BY account_id LIMIT 1)
           FROM queued WHERE queued.account_id IS NOT NULL
         )
         SELECT t.id, t.account_id, t.attempt, t.created_at,
           (SELECT count(*) FROM tasks p WHERE p.status = 'IN_PROGRESS' AND p.account_id = queued.account_id) AS in_progress
         FROM queued JOIN tasks t ON t.id = (
           SELECT id FROM tasks WHERE status = 'CREATED' AND account_id = queued.account_id AND run_after <= ?
             AND ${ofModels.sql} ORDER BY id LIMIT 1)`,
      )
      .all(now, ...ofModels.params) as {
      id: string;
      account_id: string;
      attempt: number;
      created_at: number;
      in_progress: number;
    }[];
    return rows.map((r) => ({
      id: r.id,
      accountId: r.account_id,
      attempt: r.attempt,
      createdAt: r.created_at,
      inProgress: r.in_progress,
    }));
  }

  async failTasksPastDeadline(now: Date, deadlineMs: number): Promise<string[]> {
    // Read first: most sweeps find nothing, and they must not cost a durable commit.
    const expiredStatement = this.db.statement(
      "SELECT id, attempt FROM tasks WHERE status = 'CREATED' AND created_at <= ?",
    );
    const cutoff = deadlineCutoff(now, deadlineMs).getTime();
    if (expiredStatement.all(cutoff).length === 0) return [];
    return this.db.groupCommit(
      () => {
        const failed: string[] = [];
        for (const task of expiredStatement.all(cutoff) as { id: string; attempt: number }[]) {
          const finished = this.finish(task.id, task.attempt, 'fail', now, {
            error: DEADLINE_EXCEEDED,
            fromStatuses: ['CREATED'],
          });
          if (finished) failed.push(task.id);
        }
        return failed;
      },
      { durable: true },
    );
  }

  async renewLease(taskId: string, attempt: number, now: Date, leaseMs: number): Promise<boolean> {
    const result = this.db.writeUnsynced(() =>
      this.db
        .statement("UPDATE tasks SET lease_expires_at = ? WHERE id = ? AND attempt = ? AND status = 'IN_PROGRESS'")
        .run(now.getTime() + leaseMs, taskId, attempt),
    );
    return result.changes === 1;
  }

  async completeTask(input: { taskId: string; attempt: number; media: GeneratedMediaInput[]; now: Date }) {
    try {
      return await this.db.groupCommit(() => this.complete(input), { durable: true });
    } catch (error) {
      if (error instanceof BlobReservationLapsedError) return false;
      throw error;
    }
  }

  private complete(input: { taskId: string; attempt: number; media: GeneratedMediaInput[]; now: Date }): boolean {
    const generated: GeneratedMediaRef[] = input.media.map(generatedMediaRef);
    const finished = this.finish(input.taskId, input.attempt, 'complete', input.now, { generated });
    if (!finished) return false;
    for (const m of input.media) {
      const media: MediaRecord = {
        ...m,
        accountId: finished.accountId,
        source: 'generated',
        taskId: input.taskId,
        createdAt: input.now,
      };
      // A blob whose reservation lapsed may already be swept: complete nothing, keep the task
      // IN_PROGRESS for a later attempt. Throwing rolls the whole transaction back.
      if (!insertMediaIn(this.db, media, input.now)) throw new BlobReservationLapsedError(m.blobKey);
    }
    return true;
  }

  async failTask(input: {
    taskId: string;
    attempt: number;
    error: { code: string; message: string };
    now: Date;
  }): Promise<boolean> {
    return this.db.groupCommit(
      () => this.finish(input.taskId, input.attempt, 'fail', input.now, { error: input.error }) !== null,
      { durable: true },
    );
  }

  async requeueTask(input: {
    taskId: string;
    attempt: number;
    runAfter: Date;
    now: Date;
    deferred?: boolean;
  }): Promise<boolean> {
    return this.db.groupCommit(
      () => this.requeue(input.taskId, input.attempt, input.runAfter.getTime(), input.deferred ?? false),
      { durable: true },
    );
  }

  async cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord> {
    return this.db.groupCommit(
      () => {
        const row = this.db
          .statement('SELECT status, attempt FROM tasks WHERE id = ? AND account_id = ?')
          .get(taskId, accountId) as { status: TaskStatus; attempt: number } | undefined;
        if (!row) throw new DomainError('not_found', 'Task not found.');
        nextStatus(row.status, 'cancel'); // throws invalid_state for a terminal task
        this.finish(taskId, row.attempt, 'cancel', now, { fromStatuses: statusesAllowing('cancel'), anyAttempt: true });
        return this.readTask('id = ?', taskId)!;
      },
      { durable: true },
    );
  }

  private requeue(taskId: string, attempt: number, runAfter: number, deferred: boolean): boolean {
    const result = this.db
      .statement(
        `UPDATE tasks SET status = 'CREATED', lease_expires_at = NULL, run_after = ?, deferred_attempts = deferred_attempts + ?
           WHERE id = ? AND attempt = ? AND status = 'IN_PROGRESS'`,
      )
      .run(runAfter, deferred ? 1 : 0, taskId, attempt);
    return result.changes === 1;
  }

  /**
   * Moves a task into a terminal state if it is still where `event` may start from (by default
   * IN_PROGRESS under this attempt), refunding and enqueueing the webhook event with it. Returns the
   * task's account, or null when the task was not there to move (fenced out).
   */
  private finish(
    taskId: string,
    attempt: number,
    event: Extract<TaskEvent, 'complete' | 'fail' | 'cancel'>,
    now: Date,
    details: {
      generated?: GeneratedMediaRef[];
      error?: { code: string; message: string };
      fromStatuses?: TaskStatus[];
      anyAttempt?: boolean;
    },
  ): { accountId: string } | null {
    const fromStatuses = details.fromStatuses ?? ['IN_PROGRESS'];
    const target = nextStatus(fromStatuses[0], event);
    const updated = this.db
      .statement(
        `UPDATE tasks SET status = ?, generated = coalesce(?, generated), error_code = ?, error_message = ?,
             completed_at = ?, lease_expires_at = NULL
           WHERE id = ? AND status IN (${fromStatuses.map(() => '?').join(', ')}) ${details.anyAttempt ? '' : 'AND attempt = ?'}
           RETURNING account_id, webhook_url`,
      )
      .get(
        target,
        details.generated ? JSON.stringify(details.generated) : null,
        details.error?.code ?? null,
        details.error?.message ?? null,
        now.getTime(),
        taskId,
        ...fromStatuses,
        ...(details.anyAttempt ? [] : [attempt]),
      ) as { account_id: string; webhook_url: string | null } | undefined;
    if (!updated) return null;
    // Every status a task can finish from is active (terminal states are final): one active task fewer.
    countActiveTask(this.db, updated.account_id, -1);
    if (refundsOnEntry(target)) refundTaskIn(this.db, taskId, now);
    const type = webhookEventFor(target);
    if (updated.webhook_url && type)
      enqueueWebhookEvent(this.db, { accountId: updated.account_id, taskId, type, url: updated.webhook_url, now });
    return { accountId: updated.account_id };
  }
}

class BlobReservationLapsedError extends Error {
  constructor(blobKey: string) {
    super(`The reservation of blob ${blobKey} lapsed before its media row was written.`);
  }
}
