import { TASK_STATUSES } from '../../../schemas/resources.js';
import { notFound } from '../../core/errors.js';
import { admitTasks, finishEffects } from '../../core/task-admission.js';
import {
  afterLostLease,
  CLAIM,
  claimOrder,
  deadlineCutoff,
  DEADLINE_EXCEEDED,
  deferredAttemptsAdded,
  isPastDeadline,
  RELEASE,
  taskFinish,
  type TaskFinish,
} from '../../core/task-execution.js';
import {
  generatedMediaRef,
  nextStatus,
  type GeneratedMediaRef,
  type TaskRecord,
  type TaskStatus,
} from '../../core/task.js';
import { newestFirstKeyset, pageFetchSize, pageOf } from '../paging.js';
import type {
  ClaimPolicy,
  IdempotencyCompletion,
  Page,
  TaskCompletion,
  TaskCreationLimits,
  TaskExecutionStore,
  TaskFailureReport,
  TaskListQuery,
  TaskRequeue,
  TaskState,
  TaskStore,
} from '../port.js';
import { backendAdmitsCallIn, modelsCondition } from './backend-limits.js';
import { modelsOfAccount } from './account-ranges.js';
import {
  addKeySpendIn,
  admittingAccountIn,
  chargeAdmissionIn,
  countActiveTask,
  keySpentInPeriodIn,
  refundTaskIn,
} from './accounts.js';
import { budgetPeriodOf } from '../../core/key-scope.js';
import { completeIdempotencyKeyIn, idempotencyKeyHeldIn } from './idempotency-keys.js';
import { insertMediaIn, referencedMediaIn } from './media.js';
import { TASK_COLUMNS, taskValues, toTask, type TaskRecordRow } from './rows.js';
import type { SqliteDatabase } from './sqlite-database.js';
import { integerParameter, namedTextParameter, textParameter } from './unplanned-parameters.js';
import { BlobReservationLapsedError, generatedMediaRecords } from '../task-completion.js';
import { enqueueWebhookEvent } from './webhooks.js';

/** The columns of a task record, by name: every read of a task goes through them and toTask. */
const TASK_SELECT = `SELECT ${TASK_COLUMNS.join(', ')} FROM tasks`;
/** The models an account has tasks of (a skip scan of tasks_account_model_status). */
const MODELS_OF_ACCOUNT = modelsOfAccount(namedTextParameter('accountId'));

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
    return this.db.groupCommit(() => this.admit([task], limits, completesKey), { durable: true });
  }

  async insertTasksWithDebits(
    tasks: readonly TaskRecord[],
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    // One savepoint and one admission (core admitTasks against one balance read): a refusal of any
    // task admits none of them; the key is completed once every debit is in.
    return this.db.groupCommit(() => this.admit(tasks, limits, completesKey), { durable: true });
  }

  /**
   * Admits `tasks` (all of one account) in the caller's transaction: reads what core admitTasks
   * decides on (the write transaction holds them still until commit), then writes what it
   * decided. Throws the core's refusal, changing nothing.
   */
  private admit(
    tasks: readonly TaskRecord[],
    limits: TaskCreationLimits,
    completesKey: IdempotencyCompletion | undefined,
  ): void {
    const { accountId } = tasks[0];
    // A key with a budget: its spend in the period is its key_spend row (read and added to here).
    const period = budgetPeriodOf(limits.key, tasks[0].createdAt);
    const admission = admitTasks({
      tasks,
      referencedMedia: referencedMediaIn(this.db, accountId, [...new Set(tasks.flatMap((t) => t.imageReference))]),
      account: admittingAccountIn(this.db, accountId),
      limits,
      ...(limits.key && {
        key: { scope: limits.key.scope, spentInPeriod: period ? keySpentInPeriodIn(this.db, period) : 0 },
      }),
      keyStillHeld: completesKey && idempotencyKeyHeldIn(this.db, completesKey),
    });
    chargeAdmissionIn(this.db, accountId, admission);
    if (period)
      addKeySpendIn(
        this.db,
        period,
        tasks.reduce((sum, task) => sum + task.cost, 0),
      );
    const insert = this.db.statement(
      `INSERT INTO tasks (id, account_id, status, model, prompt, image_reference, aspect_ratio, resolution, output_format,
         output_compression, seed, width, height, cost, webhook_url, end_user_id, key_id, generated, error_code,
         error_message, attempt, deferred_attempts, lease_expires_at, run_after, created_at, started_at, completed_at)
       VALUES (@id, @account_id, @status, @model, @prompt, @image_reference, @aspect_ratio, @resolution, @output_format,
         @output_compression, @seed, @width, @height, @cost, @webhook_url, @end_user_id, @key_id, @generated, @error_code,
         @error_message, @attempt, @deferred_attempts, @lease_expires_at, @run_after, @created_at, @started_at, @completed_at)`,
    );
    for (const task of tasks) insert.run(taskValues(task));
    if (completesKey && admission.completesKey) completeIdempotencyKeyIn(this.db, completesKey);
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

  async getTaskStates(taskIds: readonly string[]): Promise<TaskState[]> {
    if (taskIds.length === 0) return [];
    // One statement for any number of ids: json_each's rows drive a primary-key seek each.
    return this.db
      .statement('SELECT id, status, attempt FROM tasks WHERE id IN (SELECT value FROM json_each(?))')
      .all(JSON.stringify(taskIds)) as TaskState[];
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // The account's tasks are in one index, ordered (account_id, model, status, id) (migration 6):
    // a page is the newest of the merge of its (model, status) ranges, each read newest first and
    // only as far as the merge takes from it, so a page costs the same at any depth. Time bounds
    // become id bounds (UUIDv7 ids start with their creation millisecond).
    const { conditions, params } = newestFirstKeyset(
      accountId,
      query.cursor,
      {},
      { after: query.createdAfter, before: query.createdBefore },
      namedTextParameter,
    );
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
        ranges.push(
          `${TASK_SELECT} WHERE ${where} AND model = ${namedTextParameter(`model${n}`)} AND status = ${namedTextParameter(`status${n}`)}`,
        );
      }
    }
    if (ranges.length === 0) return { items: [], nextCursor: null };
    // The limit is written into the SQL: the planner reads a bound LIMIT, and the statement would
    // be compiled again on every run (unplanned-parameters.ts; docs/performance-history.md).
    const rows = this.db
      .listStatement(`${ranges.join(' UNION ALL ')} ORDER BY id DESC LIMIT ${pageFetchSize(query.limit)}`)
      .all(params) as TaskRecordRow[];
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.db.write(() => refundTaskIn(this.db, taskId, now));
  }

  async claimTasks(policy: ClaimPolicy, limit: number): Promise<TaskRecord[]> {
    const now = policy.now.getTime();
    return this.db.writeUnsynced(() => {
      const expired = this.db
        .statement('SELECT id, attempt, deferred_attempts FROM tasks WHERE status = ? AND lease_expires_at < ?')
        .all(RELEASE.from, now) as { id: string; attempt: number; deferred_attempts: number }[];
      for (const lost of expired) {
        const outcome = afterLostLease(
          { attempt: lost.attempt, deferredAttempts: lost.deferred_attempts },
          policy.maxAttempts,
        );
        if (outcome.action === 'fail')
          finishTaskIn(this.db, lost.id, lost.attempt, taskFinish('fail', 'attempt'), policy.now, {
            error: outcome.error,
          });
        else requeueTaskIn(this.db, lost.id, lost.attempt, now, { deferred: false });
      }
      // One task at a time: each sees the ones claimed before it in progress (its account's turn,
      // the shared limit's calls in flight).
      const claimed: TaskRecord[] = [];
      while (claimed.length < limit) {
        if (policy.sharedLimit && !backendAdmitsCallIn(this.db, policy.sharedLimit, policy.models ?? [], now)) break;
        const next = claimOrder(this.claimCandidates(policy.models, now))[0];
        if (!next) break;
        if (isPastDeadline(new Date(next.createdAt), policy.now, policy.deadlineMs)) {
          finishTaskIn(this.db, next.id, next.attempt, taskFinish('fail', 'queued'), policy.now, {
            error: DEADLINE_EXCEEDED,
          });
          continue;
        }
        const moved = this.db
          .statement(
            `UPDATE tasks SET status = ?, attempt = attempt + 1, calling = 1, lease_expires_at = ?, started_at = coalesce(started_at, ?)
               WHERE id = ? RETURNING ${TASK_COLUMNS.join(', ')}`,
          )
          .get(CLAIM.to, now + policy.leaseMs, now, next.id) as TaskRecordRow;
        claimed.push(toTask(moved));
      }
      return claimed;
    });
  }

  /**
   * Each account's oldest runnable task (of `models`), with the account's tasks in progress: one
   * seek per account with queued tasks (a skip scan of tasks_queue), one range each for the rest.
   */
  private claimCandidates(models: readonly string[] | undefined, now: number) {
    const ofModels = models ? modelsCondition(models, 'model', textParameter) : { sql: '1', params: [] };
    const queuedStatus = namedTextParameter('queued');
    const runningStatus = namedTextParameter('running');
    const rows = this.db
      .statement(
        `WITH RECURSIVE queued(account_id) AS (
           SELECT (SELECT account_id FROM tasks WHERE status = ${queuedStatus} ORDER BY account_id LIMIT 1)
           UNION ALL
           SELECT (SELECT account_id FROM tasks WHERE status = ${queuedStatus} AND account_id > queued.account_id
                   ORDER BY account_id LIMIT 1)
           FROM queued WHERE queued.account_id IS NOT NULL
         )
         SELECT t.id, t.account_id, t.attempt, t.created_at,
           (SELECT count(*) FROM tasks p WHERE p.status = ${runningStatus} AND p.account_id = queued.account_id) AS in_progress
         FROM queued JOIN tasks t ON t.id = (
           SELECT id FROM tasks WHERE status = ${queuedStatus} AND account_id = queued.account_id AND run_after <= ${integerParameter('@now')}
             AND ${ofModels.sql} ORDER BY id LIMIT 1)`,
      )
      .all({ queued: CLAIM.from, running: CLAIM.to, now }, ...ofModels.params) as {
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
    const expiredStatement = this.db.statement('SELECT id, attempt FROM tasks WHERE status = ? AND created_at <= ?');
    const cutoff = deadlineCutoff(now, deadlineMs).getTime();
    if (expiredStatement.all(CLAIM.from, cutoff).length === 0) return [];
    return this.db.groupCommit(
      () => {
        const failed: string[] = [];
        for (const task of expiredStatement.all(CLAIM.from, cutoff) as { id: string; attempt: number }[]) {
          const finished = finishTaskIn(this.db, task.id, task.attempt, taskFinish('fail', 'queued'), now, {
            error: DEADLINE_EXCEEDED,
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
        .statement('UPDATE tasks SET lease_expires_at = ? WHERE id = ? AND attempt = ? AND status = ?')
        .run(now.getTime() + leaseMs, taskId, attempt, CLAIM.to),
    );
    return result.changes === 1;
  }

  async completeTask(input: TaskCompletion) {
    try {
      return await this.db.groupCommit(() => this.complete(input), { durable: true });
    } catch (error) {
      if (error instanceof BlobReservationLapsedError) return false;
      throw error;
    }
  }

  private complete(input: TaskCompletion): boolean {
    const generated: GeneratedMediaRef[] = input.media.map(generatedMediaRef);
    const finish = taskFinish('complete', 'attempt');
    const finished = finishTaskIn(this.db, input.taskId, input.attempt, finish, input.now, { generated });
    if (!finished) return false;
    for (const media of generatedMediaRecords(input, finished.accountId)) {
      if (!insertMediaIn(this.db, media, input.now)) throw new BlobReservationLapsedError(media.blobKey);
    }
    return true;
  }

  async failTask(input: TaskFailureReport): Promise<boolean> {
    return this.db.groupCommit(
      () =>
        finishTaskIn(this.db, input.taskId, input.attempt, taskFinish('fail', 'attempt'), input.now, {
          error: input.error,
        }) !== null,
      { durable: true },
    );
  }

  async requeueTask(input: TaskRequeue): Promise<boolean> {
    return this.db.groupCommit(
      () =>
        requeueTaskIn(this.db, input.taskId, input.attempt, input.runAfter.getTime(), {
          deferred: input.deferred ?? false,
        }),
      { durable: true },
    );
  }

  async cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord> {
    return this.db.groupCommit(
      () => {
        const row = this.db
          .statement('SELECT status, attempt FROM tasks WHERE id = ? AND account_id = ?')
          .get(taskId, accountId) as { status: TaskStatus; attempt: number } | undefined;
        if (!row) throw notFound('Task');
        nextStatus(row.status, 'cancel'); // throws invalid_state for a terminal task
        finishTaskIn(this.db, taskId, row.attempt, taskFinish('cancel', 'any'), now);
        return this.readTask('id = ?', taskId)!;
      },
      { durable: true },
    );
  }
}

/** Puts a running attempt back in the queue, due at runAfter; false when the attempt was fenced out. */
function requeueTaskIn(
  db: SqliteDatabase,
  taskId: string,
  attempt: number,
  runAfter: number,
  release: { deferred: boolean },
): boolean {
  const result = db
    .statement(
      `UPDATE tasks SET status = ?, lease_expires_at = NULL, run_after = ?, deferred_attempts = deferred_attempts + ?
         WHERE id = ? AND attempt = ? AND status = ?`,
    )
    .run(RELEASE.to, runAfter, deferredAttemptsAdded(release), taskId, attempt, RELEASE.from);
  return result.changes === 1;
}

/**
 * Applies `finish` (core taskFinish) to the task if it is still where the finish may start from:
 * the move, the active-task count, the refund and the webhook event, in the caller's transaction.
 * Returns the task's account, or null when the task was not there to move (fenced out).
 */
function finishTaskIn(
  db: SqliteDatabase,
  taskId: string,
  attempt: number,
  finish: TaskFinish,
  now: Date,
  details: { generated?: GeneratedMediaRef[]; error?: { code: string; message: string } } = {},
): { accountId: string } | null {
  const updated = db
    .statement(
      `UPDATE tasks SET status = ?, generated = coalesce(?, generated), error_code = ?, error_message = ?,
           completed_at = ?, lease_expires_at = NULL
         WHERE id = ? AND status IN (${finish.from.map(() => '?').join(', ')}) ${finish.fencedByAttempt ? 'AND attempt = ?' : ''}
         RETURNING account_id, webhook_url`,
    )
    .get(
      finish.to,
      details.generated ? JSON.stringify(details.generated) : null,
      details.error?.code ?? null,
      details.error?.message ?? null,
      now.getTime(),
      taskId,
      ...finish.from,
      ...(finish.fencedByAttempt ? [attempt] : []),
    ) as { account_id: string; webhook_url: string | null } | undefined;
  if (!updated) return null;
  const effects = finishEffects(finish, { webhookUrl: updated.webhook_url });
  if (effects.activeTasksDelta !== 0) countActiveTask(db, updated.account_id, effects.activeTasksDelta);
  if (effects.refund) refundTaskIn(db, taskId, now);
  if (effects.webhook) enqueueWebhookEvent(db, { accountId: updated.account_id, taskId, ...effects.webhook, now });
  return { accountId: updated.account_id };
}
