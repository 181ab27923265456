/**
 * A client that holds thousands of long-polls or event streams from a process of its own
 * (bench/lib/waiting-client-process.ts), one socket each, and times each answer there. The
 * scenario's driver keeps creating, sampling and canceling meanwhile; none of that runs in the
 * process that takes the times.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export type WaitVia = 'long-poll' | 'event-stream';

/** The fields of the task in an answer that the scenario reads. */
export interface AnsweredTask {
  task_id: string;
  status: string;
  completed_at: string | null;
}

export interface ClientAnswer {
  /** The client's wall clock (bench/lib/wall-clock.ts) when the answer, or the stream's terminal event, arrived. */
  answeredAt: number;
  /** HTTP status, or the client's error code. */
  status: number | string;
  task: AnsweredTask | null;
}

export type ClientMessage =
  | { type: 'start'; origin: string; headers: Record<string, string>; paths: string[]; via: WaitVia }
  | { type: 'answered' }
  | { type: 'settle' }
  | { type: 'destroy' };

export interface AllWaiting {
  type: 'all-waiting';
  /** From the first request sent until every wait was on its socket (and, for streams, open). */
  sendingMs: number;
  /** Waits held then. */
  waiting: number;
  /** Most waits held at one time so far (10 ms samples). */
  heldAtOnce: number;
}

export interface Settled {
  type: 'settled';
  answers: ClientAnswer[];
  /** The client's own GC pauses from when every wait was on its socket (wall clock, ms); the scenario keeps its window's. */
  gcPauses: { at: number; ms: number }[];
}

export type ClientReply =
  | AllWaiting
  | { type: 'answered'; taskIds: string[] }
  | Settled
  | { type: 'failed'; error: string };

export class WaitingClient {
  private constructor(private readonly child: ChildProcess) {}

  /** Starts the client process (under the bench's own loader, with `--expose-gc`). */
  static async start(): Promise<WaitingClient> {
    const script = fileURLToPath(new URL('./waiting-client-process.ts', import.meta.url));
    const child = spawn(process.execPath, [...process.execArgv, '--expose-gc', script], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await once(child, 'spawn');
    return new WaitingClient(child);
  }

  /** Sends one GET per path, all at once; resolves once every one waits (streams: open). */
  async hold(origin: string, headers: Record<string, string>, paths: string[], via: WaitVia): Promise<AllWaiting> {
    return this.ask({ type: 'start', origin, headers, paths, via }, 'all-waiting');
  }

  /** The tasks answered so far. */
  async answeredTaskIds(): Promise<string[]> {
    return (await this.ask({ type: 'answered' }, 'answered')).taskIds;
  }

  /** Resolves once every wait has ended by itself: the answers and the client's pauses. */
  settle(): Promise<Settled> {
    return this.ask({ type: 'settle' }, 'settled');
  }

  /** Ends every wait (its sockets destroyed) and the process. */
  async close(): Promise<void> {
    if (this.child.exitCode !== null || !this.child.connected) return;
    await this.ask({ type: 'destroy' }, 'settled');
    this.child.disconnect();
    await once(this.child, 'exit');
  }

  private ask<T extends ClientReply['type']>(
    message: ClientMessage,
    replyType: T,
  ): Promise<Extract<ClientReply, { type: T }>> {
    return new Promise((resolve, reject) => {
      const onMessage = (reply: ClientReply) => {
        if (reply.type !== replyType && reply.type !== 'failed') return;
        cleanUp();
        if (reply.type === 'failed') reject(new Error(`waiting client: ${reply.error}`));
        else resolve(reply as Extract<ClientReply, { type: T }>);
      };
      const onExit = (code: number | null) => {
        cleanUp();
        reject(new Error(`waiting client exited with ${code}`));
      };
      const cleanUp = () => {
        this.child.off('message', onMessage);
        this.child.off('exit', onExit);
      };
      this.child.on('message', onMessage);
      this.child.on('exit', onExit);
      this.child.send(message);
    });
  }
}
