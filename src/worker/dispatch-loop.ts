import type { TaskRecord } from '../core/task.js';
import type { WorkerMetrics } from '../services/capacity-metrics.js';
import type { BackendLane } from './backend-lane.js';
import type { WorkerLog } from './worker-log.js';

/**
 * The most tasks one claim takes for a backend with free slots and no shared limit. A claim of
 * several is one turn read and one move on PostgreSQL, however many it takes: slots that came free
 * together are filled in one round trip, not one each (docs/performance-history.md, "Claims for a set of free
 * slots"). A shared limit claims one at a time: its claims queue on the limit's row anyway.
 */
const MAX_TASKS_PER_CLAIM = 8;

export interface DispatchLoopOptions {
  lanes: readonly BackendLane[];
  pollMs: number;
  now: () => Date;
  /** Once per turn, before the claims (the deadline sweep). */
  beforeClaims(): Promise<void>;
  /** Claims up to `limit` tasks for the lane (fewer when fewer are runnable). */
  claim(lane: BackendLane, limit: number): Promise<TaskRecord[]>;
  /** Runs a claimed task to its end; the lane counts it as running meanwhile. */
  run(lane: BackendLane, task: TaskRecord): Promise<void>;
  log: WorkerLog;
  metrics?: WorkerMetrics;
}

/**
 * One loop per process that claims for its backends: each turn fills the free slots of the lanes
 * that were poked since the last (every lane after the poll interval or a backend's pause),
 * launches what it claimed, and sleeps until poked (a task created for a lane's models, a slot
 * freed), the poll interval, or the end of a backend's pause.
 */
export class DispatchLoop {
  private readonly running = new Set<Promise<void>>();
  private loop: Promise<void> | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;
  /** The lanes the next turn claims for: every lane to begin with. */
  private readonly due: Set<BackendLane>;

  constructor(private readonly options: DispatchLoopOptions) {
    this.due = new Set(options.lanes);
  }

  start(): void {
    this.loop = this.dispatch();
  }

  /**
   * Looks for work at once for `lanes` (a task created for their models, a slot freed), or for
   * every lane. A lane that could not run the task is not claimed for: on PostgreSQL even an empty
   * claim is a query, and for a backend with a shared limit a transaction on the limit's row, made
   * by every worker process at every create (docs/performance-history.md, "A create wakes only the backends that
   * run its model").
   */
  poke(lanes: readonly BackendLane[] = this.options.lanes): void {
    // Remembered when the loop is not asleep (it is claiming): the next sleep returns at once, so
    // a slot freed during a claim that found the limit full is not left idle for a poll interval.
    for (const lane of lanes) this.due.add(lane);
    if (lanes.length > 0) this.wake?.();
  }

  /** Stops claiming; resolves once the loop has ended. The tasks it launched may still run (allDone). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.poke();
    await this.loop;
  }

  /** Resolves when every task launched so far has ended. */
  allDone(): Promise<void> {
    return Promise.all([...this.running]).then(() => undefined);
  }

  private async dispatch(): Promise<void> {
    while (!this.stopping) {
      const lanes = this.options.lanes.filter((lane) => this.due.has(lane));
      this.due.clear();
      try {
        await this.options.beforeClaims();
        await Promise.all(lanes.map((lane) => this.fill(lane)));
      } catch (error) {
        this.options.log.error({ err: error }, 'worker loop error');
      }
      // Every due lane was filled until it was full or the queue had nothing more for it, so
      // another turn now would only find the same. What changes that (a task created, a slot freed) pokes,
      // and a poke that came during the claims ends this sleep at once. Another turn after every
      // launch cost each dispatch a claim per lane in the event loop, between the task's claim and
      // its generator's call (docs/performance-history.md, "Dispatch latency timed at the generator's call").
      if (!this.stopping) await this.sleep();
    }
  }

  /** Claims for the lane's free slots until they are full or the queue has nothing for it. */
  private async fill(lane: BackendLane): Promise<void> {
    while (!this.stopping) {
      const room = Math.min(
        lane.freeSlots(this.options.now().getTime()),
        lane.backend.sharedLimit ? 1 : MAX_TASKS_PER_CLAIM,
      );
      if (room === 0) return;
      const claimed = await this.options.claim(lane, room);
      for (const task of claimed) this.launch(lane, task);
      if (claimed.length < room) return;
    }
  }

  private launch(lane: BackendLane, task: TaskRecord): void {
    const { metrics, log } = this.options;
    lane.running += 1;
    metrics?.tasksInProgress(lane.backend.name, lane.running);
    const run = this.options
      .run(lane, task)
      .catch((error: unknown) => log.error({ err: error, task_id: task.id }, 'task run error'))
      .finally(() => {
        lane.running -= 1;
        metrics?.tasksInProgress(lane.backend.name, lane.running);
        this.running.delete(run);
        this.poke([lane]);
      });
    this.running.add(run);
  }

  /**
   * Sleeps until poked, the poll interval, or the end of the earliest pause, whichever is first;
   * after the interval or a pause, every lane is due (a change no poke told of: another process's
   * slot or limit, a task whose run_after came).
   */
  private sleep(): Promise<void> {
    if (this.due.size > 0) return Promise.resolve();
    const now = this.options.now().getTime();
    const pauseEnds = this.options.lanes
      .filter((lane) => lane.running < lane.backend.slots && lane.pausedUntil > now)
      .map((lane) => lane.pausedUntil - now);
    const ms = Math.min(this.options.pollMs, ...pauseEnds);
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          for (const lane of this.options.lanes) this.due.add(lane);
          done();
        },
        Math.max(1, ms),
      );
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }
}
