import { DomainError } from '../core/errors.js';
import { isTerminal, type TaskRecord } from '../core/task.js';
import { nextStreamEvent, parseLastEventId, taskStepOf } from '../core/task-stream.js';
import type { ConnectionSlots } from './connection-slots.js';
import type { TaskService } from './task-service.js';

/**
 * Who reads a task's event stream: the holder of the task's signed stream_url (any account's task,
 * counted against that account) or an API key (its account's task, counted against the key).
 */
export type StreamReader = { kind: 'signed-url' } | { kind: 'key'; accountId: string; keyId: string };

/** What a stream sends, in order: the task at each change, `done` after a terminal one, or `reconnect`. */
export type StreamStep =
  | { event: 'task'; step: number; task: TaskRecord }
  | { event: 'done'; task: TaskRecord }
  | { event: 'reconnect'; reason: 'shutdown' | 'deadline' };

export interface TaskStreamsOptions {
  tasks: TaskService;
  /** Open streams per key (Bearer) or per account (signed URL); see SSE_MAX_STREAMS_PER_KEY. */
  streamSlots: ConnectionSlots;
  /** A stream ends by the task's deadline (TASK_DEADLINE_MS after creation) whatever the task does. */
  taskDeadlineMs: number;
}

/** One open stream: its steps, to be read once; stop() ends it early, close() gives its slot back. */
export interface TaskStream {
  steps(): AsyncGenerator<StreamStep, void, undefined>;
  /** The reader went away: the stream's wait ends, and it says nothing more. */
  stop(): void;
  close(): void;
}

/**
 * Task event streams (docs/design.md §3.4): the task now, each change of status, `done` at the end.
 * Streams wake on the long-poll's signals (TaskService.waitForNextStep) and end at the task's
 * deadline or, with a `reconnect` step, when this process shuts down (stopAll).
 */
export class TaskStreams {
  private readonly running = new Set<AbortController>();
  private shuttingDown = false;

  constructor(private readonly options: TaskStreamsOptions) {}

  /**
   * A stream of the task for `reader`, resumed after `lastEventId` (the header as sent), or null
   * when that id names the terminal event already: nothing is left to send. Refused with
   * not_found (another account's task) or too_many_streams (no slot free).
   */
  async open(reader: StreamReader, taskId: string, lastEventId: string | undefined): Promise<TaskStream | null> {
    const { tasks, streamSlots, taskDeadlineMs } = this.options;
    const owner = reader.kind === 'key' ? reader.accountId : null;
    const found = owner === null ? await tasks.getBySignedUrl(taskId) : await tasks.get(owner, taskId);
    let lastSeen = parseLastEventId(lastEventId);
    if (nextStreamEvent(found, lastSeen) === 'done') return null;
    const slot = streamSlots.acquire(reader.kind === 'key' ? `key:${reader.keyId}` : `account:${found.accountId}`);
    if ('refused' in slot)
      throw new DomainError(
        'too_many_streams',
        'As many event streams are open as this API key (or, through stream URLs, its account) may hold; close one.',
      );
    const stop = new AbortController();
    this.running.add(stop);
    const endsAt = found.createdAt.getTime() + taskDeadlineMs;
    const streams = this;
    return {
      async *steps() {
        let task = found;
        for (;;) {
          const next = nextStreamEvent(task, lastSeen);
          if (next === 'task') {
            lastSeen = taskStepOf(task);
            yield { event: 'task', step: lastSeen, task };
          }
          if (next !== 'wait' && isTerminal(task.status)) {
            yield { event: 'done', task };
            return;
          }
          const left = endsAt - Date.now();
          if (stop.signal.aborted || left <= 0) {
            yield { event: 'reconnect', reason: streams.shuttingDown ? 'shutdown' : 'deadline' };
            return;
          }
          task = await tasks.waitForNextStep(owner, taskId, lastSeen ?? -1, left, stop.signal);
        }
      },
      stop: () => stop.abort(),
      close: () => {
        this.running.delete(stop);
        slot.release();
      },
    };
  }

  /** Ends every open stream with a `reconnect` step: this process is shutting down. */
  stopAll(): void {
    this.shuttingDown = true;
    for (const stream of this.running) stream.abort();
  }
}
