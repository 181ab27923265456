import { setImmediate as nextTurn } from 'node:timers/promises';
import { taskStepOf } from '../core/task-stream.js';
import type { TaskState } from '../store/port.js';

/** A waiting request as the poll sees it: the task it waits on and what it last read of it. */
export interface PolledWait {
  readonly taskId: string;
  /** taskStepOf of the waiter's latest read; null until its first read returns. */
  readonly seenStep: number | null;
  /** The task is no longer at seenStep (or is gone): the waiter should read it again. */
  wake(): void;
}

/**
 * Finds the changes to waited-on tasks that this process's change signals do not carry (made by
 * another process on SQLite; a NOTIFY lost while PostgreSQL's listening connection was down): one
 * read of the states of every waited task per interval, in batches, and a wake-up for each waiter
 * whose task moved since its last read.
 *
 * Each waiter used to re-read its whole task every interval instead: 5 000 long-polls made 5 000
 * reads a second of records nobody needed, whose garbage V8 copied and promoted (decision 0029).
 */
export class TaskChangePoll {
  private readonly waits = new Set<PolledWait>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;

  /**
   * @param readStates the store's getTaskStates
   * @param intervalMs how often (LONG_POLL_FALLBACK_MS)
   * @param batchSize ids per read; between two batches the event loop serves other work, so that
   *   one interval's reads never hold a request for longer than a batch takes
   */
  constructor(
    private readonly readStates: (taskIds: readonly string[]) => Promise<TaskState[]>,
    private readonly intervalMs: number,
    private readonly batchSize = 500,
  ) {}

  /** The waits registered now. */
  get size(): number {
    return this.waits.size;
  }

  add(wait: PolledWait): void {
    this.waits.add(wait);
    if (this.timer) return;
    this.timer = setInterval(() => void this.poll(), this.intervalMs);
    // Waits keep their requests open; the poll alone must not keep a process alive.
    this.timer.unref();
  }

  /** Wakes every registered wait at once (the process is shutting down: TaskService.drain). */
  wakeAll(): void {
    for (const wait of [...this.waits]) wait.wake();
  }

  delete(wait: PolledWait): void {
    if (!this.waits.delete(wait) || this.waits.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
  }

  /** One round: every waited task's state read, and the waiters of the tasks that moved woken. */
  async poll(): Promise<void> {
    // A round that outlasts the interval (a slow store) is not overlapped by the next one.
    if (this.polling) return;
    this.polling = true;
    try {
      const asked = new Set<string>();
      for (const wait of this.waits) if (wait.seenStep !== null) asked.add(wait.taskId);
      const ids = [...asked];
      const steps = new Map<string, number>();
      for (let from = 0; from < ids.length; from += this.batchSize) {
        if (from > 0) await nextTurn();
        for (const state of await this.readStates(ids.slice(from, from + this.batchSize)))
          steps.set(state.id, taskStepOf(state));
      }
      for (const wait of this.waits) {
        // Waits that joined during the reads were not asked about; their own first read covers them.
        if (wait.seenStep === null || !asked.has(wait.taskId)) continue;
        if (steps.get(wait.taskId) !== wait.seenStep) wait.wake();
      }
    } catch {
      // The store is unreachable: the next interval asks again, and each wait still ends at its
      // deadline with the task as a read then finds it (or that read's error).
    } finally {
      this.polling = false;
    }
  }
}
