import { DomainError } from './errors.js';
import {
  accountSuspended,
  assertModelAllowed,
  assertWithinBudget,
  isExpired,
  keyExpired,
  type AccountStatus,
  type KeyScope,
} from './key-scope.js';
import { balanceChange } from './ledger.js';
import { admitsActiveTasks, CLAIM, countsAsActive, type TaskFinish } from './task-execution.js';
import { invalidMediaReference, type TaskRecord } from './task.js';

/**
 * Whether tasks may be stored and charged, decided once for every store (docs/design.md §7.3):
 * the adapter reads the facts under its locks, `admitTasks` decides, the adapter writes what it
 * was told. A create admits one task; a request for several images admits them all against one
 * read of the account, all or none.
 */

/** A medium an image reference names, as read in the admitting transaction (of the tasks' account). */
export interface ReferencedMedia {
  id: string;
  source: 'upload' | 'generated';
  expiresAt: Date;
}

/** The account as read under its row's lock; null when there is no such account. */
export interface AdmittingAccount {
  balance: number;
  /**
   * The account's tasks in ACTIVE_STATUSES, counted from the tasks after the lock was taken (so
   * that every admission before it is seen) and only up to activeTasksCountLimit.
   */
  activeTasks: number;
  /** A suspended account admits nothing (its running tasks finish). */
  status: AccountStatus;
}

/** The key a create came with, as the admitting transaction read it. */
export interface AdmittingKey {
  scope: KeyScope;
  /**
   * What the key's tasks created in the current budget period cost, refunded tasks not counted;
   * read after the account's lock (every create of the key takes it). 0 without a budget.
   */
  spentInPeriod: number;
}

export interface AdmissionFacts {
  /** The tasks to admit, in the order they are charged; all of one account. */
  tasks: readonly TaskRecord[];
  account: AdmittingAccount | null;
  /** The media the tasks' references name, of the tasks' account (unlisted ids were not found). */
  referencedMedia: readonly ReferencedMedia[];
  limits: { maxActiveTasks: number };
  /** The key the create came with; absent for a create made without one (the CLI, tests). */
  key?: AdmittingKey;
  /**
   * With an Idempotency-Key to complete in the same transaction: whether this request still holds
   * its lease (read under the key's lock). Undefined without a key.
   */
  keyStillHeld?: boolean;
}

/** What the adapter writes for an admission, in one transaction. */
export interface Admission {
  /** One debit per task, in order, with the balance after it. */
  debits: { taskId: string; amount: number; balanceAfter: number; at: Date }[];
  /** The account's balance after every debit. */
  balanceAfter: number;
  /** The active tasks the admission adds (what the cap was checked for). */
  activeTasksDelta: number;
  /** Whether a task joins the queue (the workers are woken). */
  joinsQueue: boolean;
  /** Whether the held Idempotency-Key is completed with the stored answer. */
  completesKey: boolean;
}

/**
 * Whether a medium can be an image reference of a task created at `at`: an upload (not a generated
 * image) unexpired then. Ownership is the reader's: it reads only the account's media.
 */
export function usableAsReference(media: ReferencedMedia, at: Date): boolean {
  return media.source === 'upload' && media.expiresAt.getTime() > at.getTime();
}

/** Refuses the first image reference that does not name a usable medium (usableAsReference). */
export function assertReferencesUsable(
  references: readonly string[],
  found: readonly ReferencedMedia[],
  at: Date,
): void {
  const usable = new Set(found.filter((media) => usableAsReference(media, at)).map((media) => media.id));
  const badIndex = references.findIndex((id) => !usable.has(id));
  if (badIndex !== -1) throw invalidMediaReference(badIndex);
}

/**
 * The admission of `facts.tasks`, or the refusal (thrown, a DomainError), checked in this order:
 * the account's status and the key's expiry (nothing of this key is admitted), the key's models
 * and the references (the request is wrong), the active-task cap (what a client can wait out),
 * the key's budget, the balance, then the Idempotency-Key's lease (another request took it over). Only tasks that count
 * as active (countsAsActive) count against the cap, so an admission that adds none is never
 * refused by it.
 */
export function admitTasks(facts: AdmissionFacts): Admission {
  if (facts.account?.status === 'suspended') throw accountSuspended();
  const key = facts.key;
  if (key) {
    if (facts.tasks.some((task) => isExpired(key.scope, task.createdAt))) throw keyExpired();
    for (const task of facts.tasks) assertModelAllowed(key.scope, task.model);
  }
  for (const task of facts.tasks) assertReferencesUsable(task.imageReference, facts.referencedMedia, task.createdAt);
  const activeTasksDelta = facts.tasks.filter((task) => countsAsActive(task.status)).length;
  const { maxActiveTasks } = facts.limits;
  if (
    activeTasksDelta > 0 &&
    facts.account &&
    !admitsActiveTasks(facts.account.activeTasks, activeTasksDelta, maxActiveTasks)
  ) {
    throw new DomainError('too_many_active_tasks', `An account may have at most ${maxActiveTasks} active tasks.`);
  }
  if (key) {
    assertWithinBudget(
      key.scope,
      key.spentInPeriod,
      facts.tasks.reduce((sum, task) => sum + task.cost, 0),
    );
  }
  let balance = facts.account?.balance ?? 0;
  const debits: Admission['debits'] = [];
  for (const task of facts.tasks) {
    balance += balanceChange('debit', task.cost);
    // A missing account has no balance to charge: refused like an empty one.
    if (!facts.account || balance < 0) {
      throw new DomainError('insufficient_tokens', insufficientTokensDetail(facts.tasks));
    }
    debits.push({ taskId: task.id, amount: task.cost, balanceAfter: balance, at: task.createdAt });
  }
  if (facts.keyStillHeld === false) {
    throw new DomainError(
      'idempotency_in_progress',
      'Another request with this Idempotency-Key took it over; retry shortly.',
    );
  }
  return {
    debits,
    balanceAfter: balance,
    activeTasksDelta,
    joinsQueue: facts.tasks.some((task) => task.status === CLAIM.from),
    completesKey: facts.keyStillHeld === true,
  };
}

function insufficientTokensDetail(tasks: readonly TaskRecord[]): string {
  const cost = tasks.reduce((sum, task) => sum + task.cost, 0);
  return tasks.length === 1
    ? `This task costs ${cost} tokens; the balance is lower.`
    : `These ${tasks.length} tasks cost ${cost} tokens; the balance is lower.`;
}

/**
 * What finishing a task writes besides its row: taskFinish's effects for the task as it was found.
 * On PostgreSQL the account's row is written only for a refund: the cap counts the tasks
 * themselves there, so that the finishes of one account's tasks do not queue on its row's lock
 * (decision 0030).
 */
export interface FinishEffects {
  /**
   * The change to the account's count of active tasks, for a store that keeps one on the
   * account's row (SQLite, whose one writer makes that row no point of contention); PostgreSQL
   * counts the tasks at admission instead and writes nothing here.
   */
  activeTasksDelta: number;
  refund: boolean;
  /** The outbox row to insert, or null (no webhook URL, or a move that emits no event). */
  webhook: { type: NonNullable<TaskFinish['webhookEvent']>; url: string } | null;
}

/** The effects of `finish` on a task that was moved and has `webhookUrl` (null: none). */
export function finishEffects(finish: TaskFinish, task: { webhookUrl: string | null }): FinishEffects {
  return {
    activeTasksDelta: finish.activeTasksDelta,
    refund: finish.refund,
    webhook: task.webhookUrl && finish.webhookEvent ? { type: finish.webhookEvent, url: task.webhookUrl } : null,
  };
}

/**
 * Whether a task's cost goes back to the account now: a task found (with its cost) that has no
 * refund yet. The store's unique (task_id, kind) index backs this up.
 */
export function refundOf(
  task: { accountId: string; cost: number } | null,
  alreadyRefunded: boolean,
): { accountId: string; amount: number } | null {
  if (!task || alreadyRefunded) return null;
  return { accountId: task.accountId, amount: task.cost };
}
