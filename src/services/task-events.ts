import { EventEmitter } from 'node:events';

/**
 * Signals about tasks: a task was created (wake idle workers) or changed state (wake long-polls,
 * abort a canceled generation). This process raises its own; on PostgreSQL the runtime also feeds
 * in those of every other process (LISTEN/NOTIFY, src/store/postgres/task-signals.ts). On SQLite,
 * other processes' changes are found by TaskChangePoll, one read of the waited tasks' states per
 * interval.
 */
export class TaskEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    // One listener per long-poll or running task; many at once is normal, not a leak.
    this.emitter.setMaxListeners(0);
  }

  /** A task of `model` joined the queue (of a model not told: a signal from an older process). */
  taskCreated(model?: string): void {
    this.emitter.emit('created', model);
  }

  taskChanged(taskId: string): void {
    this.emitter.emit(`changed:${taskId}`);
    this.emitter.emit('changed');
  }

  /**
   * A worker of this process claimed the task: its waiters (long-polls, event streams) read it
   * again. Not an "any change": a claim writes no outbox row, so the webhook dispatcher need not look.
   */
  taskClaimed(taskId: string): void {
    this.emitter.emit(`changed:${taskId}`);
  }

  /** Any task changed; e.g. the webhook dispatcher looks for a new outbox entry at once. */
  onAnyChange(listener: () => void): () => void {
    this.emitter.on('changed', listener);
    return () => this.emitter.off('changed', listener);
  }

  onCreated(listener: (model: string | undefined) => void): () => void {
    this.emitter.on('created', listener);
    return () => this.emitter.off('created', listener);
  }

  onChanged(taskId: string, listener: () => void): () => void {
    this.emitter.on(`changed:${taskId}`, listener);
    return () => this.emitter.off(`changed:${taskId}`, listener);
  }
}
