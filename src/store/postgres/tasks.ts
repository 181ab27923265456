import type pg from 'pg';
import { notFound } from '../../core/errors.js';
import { admitTasks, finishEffects, type FinishEffects } from '../../core/task-admission.js';
import {
  afterLostLease,
  CLAIM,
  claimOrder,
  deadlineCutoff,
  DEADLINE_EXCEEDED,
  deferredAttemptsAdded,
  isPastDeadline,
  nextLostLeaseLook,
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
  GeneratedMediaInput,
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
import { backendAdmitsCallIn } from './backend-limits.js';
import {
  admissionDebits,
  ledgerRowsInsert,
  ledgerRowsValues,
  lockAdmittingAccountIn,
  refundTaskIn,
  keySpendValues,
} from './accounts.js';
import { completeIdempotencyKeyIn, lockIdempotencyKeyHeldIn } from './idempotency-keys.js';
import { referencedMediaIn } from './media.js';
import {
  notify,
  numbered,
  prepared,
  statusLiteral,
  type PostgresDatabase,
  type Queryable,
  type Tx,
} from './postgres-database.js';
import { TASK_COLUMNS, taskValues, toTask, type TaskRow } from './rows.js';
import { CHANNEL_SQL, type TaskSignal, TaskSignals } from './task-signals.js';
import { outboxRowOf } from './webhooks.js';
import { newIdAt } from '../../ids.js';

/**
 * Tasks on PostgreSQL: their creation with its debit, their listing, and the tasks table as a queue
 * (claims with FOR UPDATE SKIP LOCKED; every write that finishes an attempt fenced by its number).
 * Locks are always taken task row first, then account row, so that transactions never deadlock.
 */
export class PostgresTasks implements TaskStore, TaskExecutionStore {
  constructor(private readonly db: PostgresDatabase) {}

  async insertTaskWithDebit(
    task: TaskRecord,
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    await this.db.transaction((tx) => admitTasksIn(tx, [task], limits, completesKey));
  }

  async insertTasksWithDebits(
    tasks: readonly TaskRecord[],
    limits: TaskCreationLimits,
    completesKey?: IdempotencyCompletion,
  ): Promise<void> {
    // One transaction and one admission (core admitTasks against one balance read): a refusal of
    // any task admits none of them; the key is completed once every debit is in.
    await this.db.transaction((tx) => admitTasksIn(tx, tasks, limits, completesKey));
  }

  async getTask(accountId: string, taskId: string): Promise<TaskRecord | null> {
    const { rows } = await this.db.query<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1 AND account_id = $2`,
      [taskId, accountId],
    );
    return rows[0] ? toTask(rows[0]) : null;
  }

  async getTaskById(taskId: string): Promise<TaskRecord | null> {
    const { rows } = await this.db.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [taskId]);
    return rows[0] ? toTask(rows[0]) : null;
  }

  async getTaskStates(taskIds: readonly string[]): Promise<TaskState[]> {
    if (taskIds.length === 0) return [];
    const { rows } = await this.db.query<TaskState>(
      'SELECT id, status, attempt FROM tasks WHERE id = ANY($1::text[])',
      [taskIds],
    );
    return rows;
  }

  async listTasks(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    // One keyset range of (account_id, [status,] id) or (account_id, model, [status,] id): a page
    // costs the same at any depth. Time bounds become id bounds (UUIDv7 ids start with their millisecond).
    const { conditions, params } = newestFirstKeyset(
      accountId,
      query.cursor,
      { status: query.status, model: query.model },
      { after: query.createdAfter, before: query.createdBefore },
    );
    params.limit = pageFetchSize(query.limit);
    const { sql, values } = numbered(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE ${conditions.join(' AND ')} ORDER BY id DESC LIMIT @limit`,
      params,
    );
    const { rows } = await this.db.query<TaskRow>(sql, values);
    return pageOf(rows.map(toTask), query.limit, (t) => t.id);
  }

  async refundTask(taskId: string, now: Date): Promise<boolean> {
    return this.db.transaction((tx) => refundTaskIn(tx, taskId, now));
  }

  /**
   * A claim in two statements and no transaction when it can be (see claimInOneStatement); in one
   * transaction, as every claim was before, when a task in turn is past its deadline (it is failed
   * on the way), for what claimers that met this one held, or for a backend with a shared limit
   * (its row is locked until the claim commits). Lost leases are looked for first, when one may have run out.
   */
  async claimTasks(policy: ClaimPolicy, limit: number): Promise<TaskRecord[]> {
    await this.lookForLostLeases(policy);
    const tasks = policy.sharedLimit
      ? await this.claimInTransaction(policy, limit)
      : await this.claimInOneStatement(policy, limit);
    // The leases just granted run out no sooner than this.
    if (tasks.length > 0)
      this.nextLostLeaseLookAt = Math.min(this.nextLostLeaseLookAt, policy.now.getTime() + policy.leaseMs);
    return tasks;
  }

  /** Epoch ms at which lost leases are next looked for (core nextLostLeaseLook); 0: at the next claim. */
  private nextLostLeaseLookAt = 0;
  private lastLostLeaseLookAt = 0;
  private lostLeaseLook: Promise<void> | null = null;

  /**
   * Requeues or fails the tasks whose lease ran out (core afterLostLease), when one may have: once
   * per lease interval rather than in every claim. Concurrent claims share one look.
   */
  private async lookForLostLeases(policy: ClaimPolicy): Promise<void> {
    const now = policy.now.getTime();
    // A clock set back looks again rather than wait out the interval it measured.
    if (now < this.nextLostLeaseLookAt && now >= this.lastLostLeaseLookAt) return;
    this.lostLeaseLook ??= this.db
      .transaction(
        async (tx) => {
          // SKIP LOCKED leaves those another claimer is handling to it.
          const lost = await tx.query<{ id: string; attempt: number; deferred_attempts: number }>(
            `SELECT id, attempt, deferred_attempts FROM tasks WHERE status = $1 AND lease_expires_at < $2
             FOR UPDATE SKIP LOCKED`,
            [RELEASE.from, policy.now],
          );
          for (const task of lost.rows) {
            const outcome = afterLostLease(
              { attempt: task.attempt, deferredAttempts: task.deferred_attempts },
              policy.maxAttempts,
            );
            if (outcome.action === 'fail')
              await finishTaskIn(tx, task.id, task.attempt, taskFinish('fail', 'attempt'), policy.now, {
                error: outcome.error,
              });
            else await requeueTaskIn(tx, task.id, task.attempt, policy.now, { deferred: false });
          }
          const { rows } = await tx.query<{ earliest: Date | null }>(
            'SELECT min(lease_expires_at) AS earliest FROM tasks WHERE status = $1 AND lease_expires_at >= $2',
            [RELEASE.from, policy.now],
          );
          return rows[0].earliest;
        },
        { unsynced: true },
      )
      .then((earliest) => {
        this.lastLostLeaseLookAt = now;
        this.nextLostLeaseLookAt = nextLostLeaseLook(policy.now, policy.leaseMs, earliest);
      })
      .finally(() => {
        this.lostLeaseLook = null;
      });
    await this.lostLeaseLook;
  }

  /**
   * The claim as two statements and no transaction: the tasks in turn are read (each account's
   * next few, in core claimOrder; the spares beyond `limit` are for claimers that meet each other),
   * and one statement, unsynced, locks the first `limit` of them nobody holds and moves them.
   * The transaction decides what that cannot: a task past its deadline among them, or fewer taken
   * than the read offered (claimers that met this one held them).
   */
  private async claimInOneStatement(policy: ClaimPolicy, limit: number): Promise<TaskRecord[]> {
    const { now } = policy;
    const read = await queuedInTurn(this.db, policy.models, now, CLAIMS_PER_ACCOUNT_READ + limit - 1);
    if (read.length === 0) return [];
    if (read.some((task) => isPastDeadline(task.created_at, now, policy.deadlineMs)))
      return this.claimInTransaction(policy, limit);
    const inTurn = claimOrder(read.map((r) => ({ id: r.id, accountId: r.account_id, inProgress: r.in_progress })));
    const candidates = inTurn.map((task) => task.id);
    const { rows } = await this.db.queryUnsynced<TaskRow>(claimFirstFree(candidates, policy, limit));
    // In turn: the order they are launched in.
    const claimed = rows.map(toTask).sort((a, b) => candidates.indexOf(a.id) - candidates.indexOf(b.id));
    if (claimed.length < Math.min(limit, candidates.length))
      return [...claimed, ...(await this.claimInTransaction(policy, limit - claimed.length))];
    return claimed;
  }

  /** The claim in one transaction: the shared limit, deadlines, the turn, the lock and the move, per task. */
  private claimInTransaction(policy: ClaimPolicy, limit: number): Promise<TaskRecord[]> {
    const { now } = policy;
    return this.db.transaction(
      async (tx) => {
        const claimed: TaskRecord[] = [];
        while (claimed.length < limit) {
          // A task claimed above counts as a call in flight here (the transaction sees its own moves).
          if (policy.sharedLimit && !(await backendAdmitsCallIn(tx, policy.sharedLimit, policy.models ?? [], now)))
            break;
          const next = await lockNextInTurn(tx, policy.models, now);
          if (!next) break;
          if (isPastDeadline(next.created_at, now, policy.deadlineMs)) {
            await finishTaskIn(tx, next.id, next.attempt, taskFinish('fail', 'queued'), now, {
              error: DEADLINE_EXCEEDED,
            });
            continue;
          }
          // The one-statement claim's move, on the task this transaction holds already (SKIP
          // LOCKED never skips a row of its own transaction).
          const moved = await tx.query<TaskRow>(claimFirstFree([next.id], policy, 1));
          claimed.push(toTask(moved.rows[0]));
        }
        return claimed;
      },
      { unsynced: true },
    );
  }

  async renewLease(taskId: string, attempt: number, now: Date, leaseMs: number): Promise<boolean> {
    const result = await this.db.query(
      'UPDATE tasks SET lease_expires_at = $1 WHERE id = $2 AND attempt = $3 AND status = $4',
      [new Date(now.getTime() + leaseMs), taskId, attempt, CLAIM.to],
    );
    return result.rowCount === 1;
  }

  async completeTask(input: TaskCompletion): Promise<boolean> {
    // One statement in autocommit (COMPLETE): a completion never refunds, so nothing else joins it.
    const finish = COMPLETION;
    const generated: GeneratedMediaRef[] = input.media.map(generatedMediaRef);
    const { rows } = await this.db.query<FinishedRow & { media_rows: number }>(
      prepared('complete', COMPLETE, [
        ...finishValues(input.taskId, input.attempt, finish, input.now, { generated }),
        newIdAt(input.now),
        finish.webhookEvent,
        JSON.stringify(input.media.map(completedMediaColumns)),
      ]),
    );
    // No row: fenced out, or an image's reservation lapsed (its blob may already be swept); either
    // way nothing was written and the task stays where it was, for a later attempt.
    const finished = checkedFinish(rows[0], finish, input.taskId);
    if (finished && finished.row.media_rows !== input.media.length)
      throw new Error(
        `The completion of task ${input.taskId} wrote ${finished.row.media_rows} of ${input.media.length} media rows`,
      );
    return finished !== null;
  }

  async failTask(input: TaskFailureReport): Promise<boolean> {
    return this.db.transaction(
      async (tx) =>
        (await finishTaskIn(tx, input.taskId, input.attempt, taskFinish('fail', 'attempt'), input.now, {
          error: input.error,
        })) !== null,
    );
  }

  async requeueTask(input: TaskRequeue): Promise<boolean> {
    return this.db.transaction((tx) =>
      requeueTaskIn(tx, input.taskId, input.attempt, input.runAfter, { deferred: input.deferred ?? false }),
    );
  }

  async failTasksPastDeadline(now: Date, deadlineMs: number): Promise<string[]> {
    const cutoff = deadlineCutoff(now, deadlineMs);
    // Read first: most sweeps find nothing, and they need no transaction then.
    const found = await this.db.query('SELECT 1 FROM tasks WHERE status = $1 AND created_at <= $2 LIMIT 1', [
      CLAIM.from,
      cutoff,
    ]);
    if (found.rowCount === 0) return [];
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string; attempt: number }>(
        `SELECT id, attempt FROM tasks WHERE status = $1 AND created_at <= $2 FOR UPDATE SKIP LOCKED`,
        [CLAIM.from, cutoff],
      );
      const failed: string[] = [];
      for (const task of rows) {
        const finished = await finishTaskIn(tx, task.id, task.attempt, taskFinish('fail', 'queued'), now, {
          error: DEADLINE_EXCEEDED,
        });
        if (finished) failed.push(task.id);
      }
      return failed;
    });
  }

  async cancelTask(accountId: string, taskId: string, now: Date): Promise<TaskRecord> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ status: TaskStatus; attempt: number }>(
        'SELECT status, attempt FROM tasks WHERE id = $1 AND account_id = $2 FOR UPDATE',
        [taskId, accountId],
      );
      if (!rows[0]) throw notFound('Task');
      nextStatus(rows[0].status, 'cancel'); // throws invalid_state for a terminal task
      await finishTaskIn(tx, taskId, rows[0].attempt, taskFinish('cancel', 'any'), now);
      const task = await tx.query<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = $1`, [taskId]);
      return toTask(task.rows[0]);
    });
  }
}

/**
 * Admits `tasks` (all of one account) in the caller's transaction: reads what core admitTasks
 * decides on, under the locks that keep it true until commit (the references shared, the account
 * row, the key's row), then writes what it decided. Throws the core's refusal, changing nothing.
 */
async function admitTasksIn(
  tx: Tx,
  tasks: readonly TaskRecord[],
  limits: TaskCreationLimits,
  completesKey: IdempotencyCompletion | undefined,
): Promise<void> {
  const { accountId } = tasks[0];
  const referencedMedia = await referencedMediaIn(tx, accountId, [...new Set(tasks.flatMap((t) => t.imageReference))]);
  const read = await lockAdmittingAccountIn(tx, accountId, limits, tasks[0].createdAt);
  const admission = admitTasks({
    tasks,
    referencedMedia,
    account: read?.account ?? null,
    limits,
    ...(limits.key && { key: { scope: limits.key.scope, spentInPeriod: read?.keySpent ?? 0 } }),
    keyStillHeld: completesKey && (await lockIdempotencyKeyHeldIn(tx, completesKey)),
  });
  await tx.query(
    prepared(`admit-${tasks.length}`, admissionWrite(tasks.length), [
      admission.balanceAfter,
      accountId,
      ...ledgerRowsValues(admissionDebits(admission)),
      admission.joinsQueue ? TaskSignals.payload(createdSignal(tasks)) : null,
      ...tasks.flatMap(taskValues),
      // A key with a budget: its spend in the period grows by the tasks' cost (key_spend).
      ...keySpendValues(limits, tasks),
    ]),
  );
  if (completesKey && admission.completesKey) await completeIdempotencyKeyIn(tx, completesKey);
}

/**
 * An admission's writes in one statement: the balance it decided ($1 of account $2), its debit
 * rows ($3–$9), the NOTIFY that wakes the workers ($10, null when no task joins the queue), the
 * tasks' rows (from $11, TASK_COLUMNS then run_after, their created_at) and, last, the key's spend
 * to add (its id, null for a key without a budget; the period's start; the tasks' cost).
 */
function admissionWrite(taskCount: number): string {
  const known = admissionWrites.get(taskCount);
  if (known !== undefined) return known;
  const text = admissionWriteText(taskCount);
  admissionWrites.set(taskCount, text);
  return text;
}
const admissionWrites = new Map<number, string>();

function admissionWriteText(taskCount: number): string {
  const width = TASK_COLUMNS.split(',').length;
  const createdAt = TASK_COLUMNS.split(',').findIndex((column) => column.trim() === 'created_at');
  const rows = Array.from({ length: taskCount }, (_, row) => {
    const first = 11 + row * width;
    const values = Array.from({ length: width }, (_, column) => `$${first + column}`);
    return `(${values.join(', ')}, $${first + createdAt})`;
  });
  const spend = 11 + taskCount * width;
  return `WITH charged AS (UPDATE accounts SET balance = $1 WHERE id = $2),
    debits AS (${ledgerRowsInsert('$2', 3)}),
    admitted AS (INSERT INTO tasks (${TASK_COLUMNS}, run_after) VALUES ${rows.join(', ')}),
    spent AS (INSERT INTO key_spend (key_id, period_start, spent)
      SELECT $${spend}::text, $${spend + 1}::timestamptz, $${spend + 2}::bigint WHERE $${spend}::text IS NOT NULL
      ON CONFLICT (key_id, period_start) DO UPDATE SET spent = key_spend.spent + excluded.spent)
  SELECT pg_notify(${CHANNEL_SQL}, $10) WHERE $10::text IS NOT NULL`;
}

/**
 * How many of each account's next runnable tasks a one-statement claim of one task reads (one
 * more per further task claimed at once): the three spares are for claimers that meet each other.
 */
const CLAIMS_PER_ACCOUNT_READ = 4;

const QUEUED = statusLiteral(CLAIM.from);
const RUNNING = statusLiteral(CLAIM.to);
/** queuedInTurn's statement: the statuses are in its text, so that its plan, made once, uses the partial indexes. */
const QUEUED_IN_TURN = `WITH RECURSIVE queued(account_id) AS (
    (SELECT account_id FROM tasks WHERE status = ${QUEUED} ORDER BY account_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.account_id FROM tasks t WHERE t.status = ${QUEUED} AND t.account_id > q.account_id
            ORDER BY t.account_id LIMIT 1)
    FROM queued q WHERE q.account_id IS NOT NULL
  )
  SELECT n.id, n.created_at, q.account_id,
    (SELECT count(*) FROM tasks p WHERE p.status = ${RUNNING} AND p.account_id = q.account_id) AS in_progress
  FROM queued q CROSS JOIN LATERAL (
    SELECT id, created_at FROM tasks WHERE status = ${QUEUED} AND account_id = q.account_id AND run_after <= $1
      AND ($2::text[] IS NULL OR model = ANY($2::text[])) ORDER BY id LIMIT $3
  ) n`;

/** The claim of the first `limit` of `candidates` (in their order) that are runnable and nobody holds. */
function claimFirstFree(candidates: string[], policy: ClaimPolicy, limit: number): pg.QueryConfig {
  return prepared('claim-first-free', CLAIM_FIRST_FREE, [
    candidates,
    policy.now,
    new Date(policy.now.getTime() + policy.leaseMs),
    limit,
  ]);
}

/**
 * The statuses are written into the text: with them bound, PostgreSQL judged its generic plan
 * dearer than one planned for the values (the queued status has a partial index) and planned the
 * claim anew on every run (pg_prepared_statements: 412 custom plans, 0 generic, in a run of 400
 * no-op tasks); written in, it keeps one plan after the fifth run.
 */
const CLAIM_FIRST_FREE = `WITH next AS (
    SELECT id AS next_id FROM tasks WHERE id = ANY($1::text[]) AND status = ${QUEUED} AND run_after <= $2
    ORDER BY array_position($1::text[], id) LIMIT $4 FOR UPDATE SKIP LOCKED
  )
  UPDATE tasks SET status = ${RUNNING}, attempt = attempt + 1, calling = true, lease_expires_at = $3,
    started_at = coalesce(started_at, $2)
  FROM next WHERE id = next.next_id RETURNING ${TASK_COLUMNS}`;

/**
 * Each account's next `perAccount` runnable tasks (of `models`), oldest first, with the
 * account's tasks in progress: one index seek per account with queued tasks (a skip scan of
 * tasks_queued_by_account). A read without locks: the claim that follows checks each again.
 */
async function queuedInTurn(
  db: Queryable,
  models: readonly string[] | undefined,
  now: Date,
  perAccount: number,
): Promise<{ id: string; account_id: string; in_progress: number; created_at: Date }[]> {
  const { rows } = await db.query<{ id: string; account_id: string; in_progress: number; created_at: Date }>(
    prepared('queued-in-turn', QUEUED_IN_TURN, [now, models ?? null, perAccount]),
  );
  return rows;
}

/**
 * The next task in turn (core claimOrder), locked: each account's oldest runnable task (queuedInTurn).
 * A candidate another claimer holds is skipped; when all are held, the oldest runnable task
 * nobody holds, so that claimers never idle on contention.
 */
async function lockNextInTurn(
  tx: Tx,
  models: readonly string[] | undefined,
  now: Date,
): Promise<{ id: string; attempt: number; created_at: Date } | null> {
  const rows = await queuedInTurn(tx, models, now, 1);
  const inTurn = claimOrder(rows.map((r) => ({ id: r.id, accountId: r.account_id, inProgress: r.in_progress })));
  for (const candidate of inTurn) {
    const locked = await tx.query<{ id: string; attempt: number; created_at: Date }>(
      'SELECT id, attempt, created_at FROM tasks WHERE id = $1 AND status = $2 FOR UPDATE SKIP LOCKED',
      [candidate.id, CLAIM.from],
    );
    if (locked.rows[0]) return locked.rows[0];
  }
  if (inTurn.length === 0) return null;
  const { rows: oldest } = await tx.query<{ id: string; attempt: number; created_at: Date }>(
    `SELECT id, attempt, created_at FROM tasks WHERE status = $3 AND run_after <= $1
       AND ($2::text[] IS NULL OR model = ANY($2::text[])) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [now, models ?? null, CLAIM.from],
  );
  return oldest[0] ?? null;
}

/** Puts a running attempt back in the queue, due at runAfter; false when the attempt was fenced out. */
async function requeueTaskIn(
  tx: Tx,
  taskId: string,
  attempt: number,
  runAfter: Date,
  release: { deferred: boolean },
): Promise<boolean> {
  const result = await tx.query<{ model: string }>(
    `UPDATE tasks SET status = $5, lease_expires_at = NULL, run_after = $1, deferred_attempts = deferred_attempts + $4
       WHERE id = $2 AND attempt = $3 AND status = $6 RETURNING model`,
    [runAfter, taskId, attempt, deferredAttemptsAdded(release), RELEASE.to, RELEASE.from],
  );
  if (result.rowCount !== 1) return false;
  await notify(tx, createdSignal(result.rows));
  return true;
}

/** The signal that tasks joined the queue: with their model when they share one. */
function createdSignal(tasks: readonly { model: string }[]): TaskSignal {
  const [first, ...rest] = tasks;
  return first && rest.every((task) => task.model === first.model)
    ? { kind: 'created', model: first.model }
    : { kind: 'created' };
}

/**
 * A finish's move: fenced by attempt ($9) when the finish is, NOTIFY raised once for the row moved;
 * `condition` is one more requirement of the move.
 */
const finishMove = (
  condition = '',
) => `UPDATE tasks SET status = $1, generated = coalesce($2::json, generated), error_code = $3,
    error_message = $4, completed_at = $5, lease_expires_at = NULL
  WHERE id = $6 AND status = ANY($7::text[]) AND ($9::integer IS NULL OR attempt = $9)${condition}
  RETURNING id, account_id, webhook_url, pg_notify(${CHANNEL_SQL}, $8::text) AS notified`;
/** The outbox row ($10 its id, $11 its event) of a moved task with a webhook URL. */
const FINISH_OUTBOX = `outbox AS (${outboxRowOf('moved', { id: '$10', eventType: '$11', at: '$5' })} WHERE moved.webhook_url IS NOT NULL RETURNING 1)`;
const FINISH = `WITH moved AS (${finishMove()}) SELECT account_id, webhook_url, 0 AS outbox_rows FROM moved`;
const FINISH_WITH_OUTBOX = `WITH moved AS (${finishMove()}), ${FINISH_OUTBOX}
  SELECT account_id, webhook_url, (SELECT count(*) FROM outbox) AS outbox_rows FROM moved`;

/**
 * A completion's whole write ($12: its images' media columns, a JSON array): each image's blob
 * reservation locked and seen live (held), the move made only when every one is, then the
 * reservations taken back, the media rows and the outbox row written. The lock makes a sweeper that
 * deletes a lapsed reservation wait for this statement, or this statement see it gone.
 */
function completeStatement(finish: TaskFinish): string {
  return `WITH images AS (
      SELECT * FROM json_to_recordset($12::json) AS image(id text, blob_key text, content_type text, width integer,
        height integer, size_bytes bigint, sha256 text, expires_at timestamptz)
    ),
    held AS (
      SELECT blob_key FROM blob_deletions WHERE blob_key IN (SELECT blob_key FROM images) AND due_at > $5 FOR UPDATE
    ),
    moved AS (${finishMove(' AND (SELECT count(*) FROM held) = json_array_length($12::json)')}),
    taken AS (DELETE FROM blob_deletions WHERE blob_key IN (SELECT blob_key FROM held) AND EXISTS (SELECT 1 FROM moved)),
    media AS (
      INSERT INTO media (id, account_id, source, content_type, width, height, size_bytes, sha256, blob_key, task_id, created_at, expires_at)
      SELECT images.id, moved.account_id, 'generated', images.content_type, images.width, images.height,
        images.size_bytes, images.sha256, images.blob_key, moved.id, $5, images.expires_at
      FROM moved CROSS JOIN images RETURNING 1
    )${finish.webhookEvent ? `, ${FINISH_OUTBOX}` : ''}
    SELECT account_id, webhook_url, ${finish.webhookEvent ? '(SELECT count(*) FROM outbox)' : '0'} AS outbox_rows,
      (SELECT count(*) FROM media) AS media_rows FROM moved`;
}

/** The completion's finish (core taskFinish) and its statement, made once: neither varies per task. */
const COMPLETION = taskFinish('complete', 'attempt');
const COMPLETE = completeStatement(COMPLETION);

/** The columns of a generated image's media row that COMPLETE takes from the completion. */
function completedMediaColumns(media: GeneratedMediaInput) {
  return {
    id: media.id,
    blob_key: media.blobKey,
    content_type: media.contentType,
    width: media.width,
    height: media.height,
    size_bytes: media.sizeBytes,
    sha256: media.sha256,
    expires_at: media.expiresAt.toISOString(),
  };
}

interface FinishedRow {
  account_id: string;
  webhook_url: string | null;
  outbox_rows: number;
}

/**
 * The finish statement's row checked against finishEffects (the core decides which moves emit an
 * event; the statement applied that rule where the URL is read), with those effects. null when
 * nothing moved.
 */
function checkedFinish<Row extends FinishedRow>(
  row: Row | undefined,
  finish: TaskFinish,
  taskId: string,
): { row: Row; effects: FinishEffects } | null {
  if (!row) return null;
  const effects = finishEffects(finish, { webhookUrl: row.webhook_url });
  if (Boolean(effects.webhook) !== row.outbox_rows > 0)
    throw new Error(`The finish of task ${taskId} wrote ${row.outbox_rows} outbox rows against finishEffects`);
  return { row, effects };
}

function finishValues(
  taskId: string,
  attempt: number,
  finish: TaskFinish,
  now: Date,
  details: { generated?: GeneratedMediaRef[]; error?: { code: string; message: string } },
): unknown[] {
  return [
    finish.to,
    details.generated ? JSON.stringify(details.generated) : null,
    details.error?.code ?? null,
    details.error?.message ?? null,
    now,
    taskId,
    finish.from,
    TaskSignals.payload({ kind: 'changed', taskId }),
    finish.fencedByAttempt ? attempt : null,
  ];
}

/**
 * Applies `finish` (core taskFinish) to the task if it is still where the finish may start from:
 * the move, the refund and the webhook event, in the caller's transaction. Only a refund takes the
 * account's row: the cap counts the tasks themselves (decision 0030).
 * Returns the task's account, or null when the task was not there to move (fenced out).
 */
async function finishTaskIn(
  tx: Tx,
  taskId: string,
  attempt: number,
  finish: TaskFinish,
  now: Date,
  details: { generated?: GeneratedMediaRef[]; error?: { code: string; message: string } } = {},
): Promise<{ accountId: string } | null> {
  // One statement (prepared): the move, its NOTIFY (raised in RETURNING, delivered at commit)
  // and, for a move that emits an event, the outbox row of a task with a webhook URL, which is
  // finishEffects' rule (checked below) applied where the URL is read.
  const { rows } = await tx.query<FinishedRow>(
    finish.webhookEvent
      ? prepared('finish-with-outbox', FINISH_WITH_OUTBOX, [
          ...finishValues(taskId, attempt, finish, now, details),
          newIdAt(now),
          finish.webhookEvent,
        ])
      : prepared('finish', FINISH, finishValues(taskId, attempt, finish, now, details)),
  );
  const finished = checkedFinish(rows[0], finish, taskId);
  if (!finished) return null;
  if (finished.effects.refund) await refundTaskIn(tx, taskId, now);
  return { accountId: finished.row.account_id };
}
