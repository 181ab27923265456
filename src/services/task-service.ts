import { notFound } from '../core/errors.js';
import { isTerminal, type TaskRecord } from '../core/task.js';
import { taskStepOf } from '../core/task-stream.js';
import type { TaskEvents } from './task-events.js';
import type { Page, Store, TaskListQuery } from '../store/port.js';
import { WaitTimers } from './wait-timers.js';
import { TaskChangePoll, type PolledWait } from './task-change-poll.js';

export interface TaskServiceOptions {
  store: Pick<Store, 'tasks'>;
  events: TaskEvents;
  now: () => Date;
  /** How often the waited tasks' states are read, for changes made by other processes. */
  crossProcessPollMs: number;
}

/** How a face follows tasks it waits for (waitForTasks). */
export interface TaskFollowing {
  /** How long to wait for all of them, from now. */
  waitMs: number;
  /** The caller went away: stop waiting (the tasks go on). */
  signal: AbortSignal;
  /**
   * Told of each task's state when the wait starts, at each change, and every heartbeatMs while
   * none comes (MCP's progress notifications); unset, the wait is the long-poll's.
   */
  onProgress?: (task: TaskRecord) => Promise<void> | void;
  heartbeatMs?: number;
}

/** While a followed task does not change, its progress is still reported this often (it is alive). */
const DEFAULT_HEARTBEAT_MS = 10_000;

/**
 * Task use cases after the create (GenerationSubmission): reads, lists, cancels and the waits of
 * every face, around the pure core, with the store and the clock.
 */
export class TaskService {
  /**
   * The waits' deadlines on one timer, at most 10 ms (and a twentieth of the poll interval) late.
   * Fine slots on purpose: the waits whose deadline falls in one slot read their tasks in the same
   * turn, and 5 000 of them in 100 slots are 50 reads a turn, not the 250 of 50 ms slots, which
   * would hold a completion's wake-ups back.
   */
  private readonly waitTimers: WaitTimers;
  /** Changes to waited tasks that no signal of this process carries, found once per interval for all waits. */
  private readonly changePoll: TaskChangePoll;
  /** Aborted by drain(): waits end with the task as it is, and new ones do not wait. */
  private readonly draining = new AbortController();

  constructor(private readonly options: TaskServiceOptions) {
    this.waitTimers = new WaitTimers(
      Math.max(1, Math.min(10, Math.floor(options.crossProcessPollMs / 20))),
      options.crossProcessPollMs,
    );
    this.changePoll = new TaskChangePoll((ids) => options.store.tasks.getTaskStates(ids), options.crossProcessPollMs);
  }

  /** Requests waiting for a task to change now: long-polls, event streams between events, tool calls. */
  get waitsHeld(): number {
    return this.changePoll.size;
  }

  /**
   * The process is shutting down (docs/design.md §4, drain): every wait held now is answered with
   * its task as it is (a long-poll gets the task's state, not a reset connection), and a wait asked
   * for from now on answers at once.
   */
  drain(): void {
    this.draining.abort();
    this.changePoll.wakeAll();
  }

  /** drain() was called: a caller that waits in a loop stops looping. */
  get isDraining(): boolean {
    return this.draining.signal.aborted;
  }

  async cancel(accountId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.cancelTask(accountId, taskId, this.options.now());
    this.options.events.taskChanged(taskId);
    return task;
  }

  /**
   * The task once it is terminal, or as it is after waitMs. Wakes on this process's change events;
   * a change made by another process is seen at the change poll's next round (crossProcessPollMs).
   */
  async waitForTerminal(accountId: string, taskId: string, waitMs: number, signal: AbortSignal): Promise<TaskRecord> {
    return this.waitUntil(
      () => this.get(accountId, taskId),
      (task) => isTerminal(task.status),
      taskId,
      waitMs,
      signal,
    );
  }

  /**
   * The tasks once each is terminal, or as they are when `waitMs` has passed (one deadline for
   * all): the wait of the OpenAI face's answer and of the MCP tools, over the long-poll's.
   */
  async waitForTasks(accountId: string, taskIds: readonly string[], following: TaskFollowing): Promise<TaskRecord[]> {
    const deadline = Date.now() + following.waitMs;
    const tasks: TaskRecord[] = [];
    for (const taskId of taskIds) {
      const remaining = Math.max(0, deadline - Date.now());
      tasks.push(
        following.onProgress
          ? await this.followSteps(accountId, taskId, remaining, following)
          : await this.waitForTerminal(accountId, taskId, remaining, following.signal),
      );
    }
    return tasks;
  }

  /** One task until terminal or waitMs, reporting its state at the start, at each change and at each heartbeat. */
  private async followSteps(
    accountId: string,
    taskId: string,
    waitMs: number,
    { signal, onProgress, heartbeatMs = DEFAULT_HEARTBEAT_MS }: TaskFollowing,
  ): Promise<TaskRecord> {
    const deadline = Date.now() + waitMs;
    let task = await this.get(accountId, taskId);
    if (waitMs > 0) await onProgress?.(task);
    // Draining (the process is shutting down): the task as it is now is the answer.
    while (!isTerminal(task.status) && !signal.aborted && !this.isDraining) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      const step = taskStepOf(task);
      task = await this.waitForNextStep(accountId, taskId, step, Math.min(remaining, heartbeatMs), signal);
      // A heartbeat, or a change; the deadline's own read is no news.
      if (Date.now() < deadline || taskStepOf(task) !== step) await onProgress?.(task);
    }
    return task;
  }

  /**
   * The task once it has moved past `afterStep` (taskStepOf: a change an event stream has not sent
   * yet), or as it is after waitMs. The same signals as the long-poll wake it. With `owner` null
   * the task is read by id alone: the caller proved access with a signed stream URL.
   */
  async waitForNextStep(
    owner: string | null,
    taskId: string,
    afterStep: number,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<TaskRecord> {
    return this.waitUntil(
      () => (owner === null ? this.getBySignedUrl(taskId) : this.get(owner, taskId)),
      (task) => taskStepOf(task) > afterStep,
      taskId,
      waitMs,
      signal,
    );
  }

  private waitUntil(
    read: () => Promise<TaskRecord>,
    settled: (task: TaskRecord) => boolean,
    taskId: string,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<TaskRecord> {
    // A read that does not wait (the hot GET) subscribes to nothing; nor does any once draining.
    if (waitMs <= 0 || this.draining.signal.aborted) return read();
    return new TaskWait(read, settled, waitMs, signal, {
      draining: this.draining.signal,
      events: this.options.events,
      timers: this.waitTimers,
      changes: this.changePoll,
      taskId,
    }).result;
  }

  async get(accountId: string, taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.getTask(accountId, taskId);
    if (!task) throw notFound('Task');
    return task;
  }

  /** A task of any account, by id alone: for a request that proved access with a signed URL. */
  async getBySignedUrl(taskId: string): Promise<TaskRecord> {
    const task = await this.options.store.tasks.getTaskById(taskId);
    if (!task) throw notFound('Task');
    return task;
  }

  list(accountId: string, query: TaskListQuery): Promise<Page<TaskRecord>> {
    return this.options.store.tasks.listTasks(accountId, query);
  }
}

/**
 * One waiting request (a long-poll, or an event stream between two events): the task read now,
 * then again on each of this process's change signals for it, when the change poll finds it moved
 * since this wait's last read (changes made by other processes), and when the client leaves, until
 * it is settled or the wait is over.
 *
 * Built to allocate once per wait, not per wake-up: one promise, one function the signal, the
 * timer wheel and the abort all call, subscriptions kept for the whole wait. Each wake-up makes
 * only its read, which is dropped unless it ends the wait. 5 000 waiters that each kept a record, a
 * promise and a few closures from one fallback re-read to the next made V8 copy and promote about
 * 10 MiB a second out of the young generation: scavenges of 20–75 ms, and the wake-ups of the
 * completions behind them (docs/performance-history.md, "Long-poll wake-ups and the young generation").
 */
class TaskWait implements PolledWait {
  private readonly outcome = Promise.withResolvers<TaskRecord>();
  readonly result = this.outcome.promise;
  readonly taskId: string;
  seenStep: number | null = null;
  private readonly deadline: number;
  readonly wake = () => this.readAgain();
  /** The timer wheel's call: the deadline, or (the wheel's horizon being shorter) a re-arm. */
  private readonly tick = () => {
    this.timerSlot = -1;
    if (this.deadline - Date.now() <= 0) this.readAgain();
    else this.arm();
  };
  private readonly unsubscribe: () => void;
  /** The timer wheel's slot of the deadline's timer; -1 while none is armed. */
  private timerSlot = -1;
  private reading = false;
  private wokenWhileReading = false;
  private ended = false;

  constructor(
    private readonly read: () => Promise<TaskRecord>,
    private readonly settled: (task: TaskRecord) => boolean,
    waitMs: number,
    private readonly signal: AbortSignal,
    private readonly context: {
      /** The service's drain: the next read ends the wait. */
      draining: AbortSignal;
      events: TaskEvents;
      timers: WaitTimers;
      changes: TaskChangePoll;
      taskId: string;
    },
  ) {
    this.taskId = context.taskId;
    this.deadline = Date.now() + waitMs;
    // Subscribed before the first read: a change committed while it runs wakes a second one.
    this.unsubscribe = context.events.onChanged(context.taskId, this.wake);
    signal.addEventListener('abort', this.wake, { once: true });
    context.changes.add(this);
    this.readAgain();
  }

  private readAgain(): void {
    if (this.ended) return;
    if (this.reading) {
      this.wokenWhileReading = true;
      return;
    }
    this.reading = true;
    this.read().then(
      (task) => {
        this.reading = false;
        this.seenStep = taskStepOf(task);
        if (
          this.settled(task) ||
          this.signal.aborted ||
          this.context.draining.aborted ||
          this.deadline - Date.now() <= 0
        ) {
          this.end();
          this.outcome.resolve(task);
        } else if (this.wokenWhileReading) {
          this.wokenWhileReading = false;
          this.readAgain();
        } else if (this.timerSlot < 0) {
          this.arm();
        }
      },
      (error: unknown) => {
        this.reading = false;
        this.end();
        this.outcome.reject(error);
      },
    );
  }

  private arm(): void {
    this.timerSlot = this.context.timers.after(this.deadline - Date.now(), this.tick);
  }

  private end(): void {
    this.ended = true;
    if (this.timerSlot >= 0) this.context.timers.cancel(this.timerSlot, this.tick);
    this.timerSlot = -1;
    this.unsubscribe();
    this.context.changes.delete(this);
    this.signal.removeEventListener('abort', this.wake);
  }
}
