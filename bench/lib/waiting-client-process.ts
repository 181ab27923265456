/**
 * The process that holds the long-poll and event-stream scenario's waits (bench/lib/waiting-client.ts
 * starts it). It does nothing else, so its own pauses stay out of the wake-up figure: the driver that
 * created 5 600 tasks, samples RSS every 10 ms and cancels thousands of tasks collected for 20–65 ms
 * at a time while it also timed the answers (docs/performance-history.md, "One read of the waited tasks per
 * interval"). Once every wait is on its socket it collects its garbage (`--expose-gc`), so the
 * sending's garbage is not carried into the measured window, and it records its own GC pauses from
 * then on, to be reported beside the figure.
 *
 * Messages (IPC): in `start`, `answered`, `settle`, `destroy`; out `all-waiting`, `answered`,
 * `settled`, `failed`.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { createParser } from 'eventsource-parser';
import { Pool, type Dispatcher } from 'undici';
import { wallClock } from './wall-clock.js';
import type { ClientAnswer, ClientMessage, ClientReply, WaitVia } from './waiting-client.js';

let waiting: Pool | null = null;
let all: Promise<void>[] = [];
const answers: ClientAnswer[] = [];
const now = wallClock();
const gcPauses: { at: number; ms: number }[] = [];

function reply(message: ClientReply): void {
  process.send?.(message);
}

process.on('message', (message: ClientMessage) => {
  void handle(message).catch((error: unknown) => reply({ type: 'failed', error: String(error) }));
});
process.on('disconnect', () => process.exit(0));

async function handle(message: ClientMessage): Promise<void> {
  switch (message.type) {
    case 'start':
      return start(message.origin, message.headers, message.paths, message.via);
    case 'answered':
      return reply({ type: 'answered', taskIds: answers.map((a) => a.task?.task_id ?? '') });
    case 'settle':
      await Promise.all(all);
      return reply({ type: 'settled', answers, gcPauses });
    case 'destroy':
      await waiting?.destroy();
      await Promise.all(all);
      return reply({ type: 'settled', answers, gcPauses });
  }
}

async function start(origin: string, headers: Record<string, string>, paths: string[], via: WaitVia): Promise<void> {
  waiting = new Pool(origin, {
    connections: paths.length,
    pipelining: 1,
    // Thousands of connects at once overflow the listen backlog (511 in Node), and a refused SYN is
    // sent again after 1, 3, 7 … s: on a loaded machine past undici's default 10 s.
    connectTimeout: 60_000,
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
  });
  const pool = waiting;
  // Event streams whose head has arrived (the service holds them) and that have not ended.
  let streamsOpen = 0;
  // Streams opened, or refused or failed before their head: when it reaches paths.length, none is on its way.
  let streamsSettled = 0;
  // Requests written to their socket and not yet answered (long-polls) or streams open: how many wait at once.
  const held = () => (via === 'event-stream' ? streamsOpen : pool.stats.running);
  let heldAtOnce = 0;
  const heldSampler = setInterval(() => (heldAtOnce = Math.max(heldAtOnce, held())), 10);
  const sendingStarted = now();
  all = paths.map(async (path) => {
    let opened = false;
    try {
      const res = await pool.request({ method: 'GET', path, headers });
      if (via === 'event-stream') {
        opened = true;
        streamsSettled++;
        streamsOpen++;
        try {
          const { answeredAt, task } = await terminalTaskEvent(res, now);
          answers.push({ answeredAt, status: res.statusCode, task });
        } finally {
          streamsOpen--;
        }
        return;
      }
      const answeredAt = now();
      const parsed = (await res.body.json()) as { data?: ClientAnswer['task'] };
      answers.push({ answeredAt, status: res.statusCode, task: parsed.data ?? null });
    } catch (error) {
      if (via === 'event-stream' && !opened) streamsSettled++;
      answers.push({ answeredAt: now(), status: (error as { code?: string }).code ?? String(error), task: null });
    }
  });
  void Promise.all(all).then(() => clearInterval(heldSampler));

  // Until every request is written to a socket of its own (none queued in the pool or a client)
  // and, for event streams, every stream is open (or failed).
  const deadline = Date.now() + 60_000;
  while (pool.stats.queued > 0 || pool.stats.pending > 0 || (via === 'event-stream' && streamsSettled < paths.length)) {
    if (Date.now() > deadline) throw new Error('waiting client: the requests were not all sent in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const waitingNow = held();
  heldAtOnce = Math.max(heldAtOnce, waitingNow);
  globalThis.gc?.();
  const sentAt = now();
  new PerformanceObserver((list) => {
    // startTime is on performance.now()'s scale; `at` on the wall clock, as the answers.
    for (const entry of list.getEntries())
      gcPauses.push({ at: now() - performance.now() + entry.startTime, ms: entry.duration });
  }).observe({ entryTypes: ['gc'] });
  reply({
    type: 'all-waiting',
    sendingMs: sentAt - sendingStarted,
    waiting: waitingNow,
    heldAtOnce,
  });
}

/** Reads an event stream until its terminal `task` event: when it was parsed, and the task. */
async function terminalTaskEvent(
  res: Dispatcher.ResponseData,
  clock: () => number,
): Promise<{ answeredAt: number; task: ClientAnswer['task'] }> {
  let terminal: { answeredAt: number; task: NonNullable<ClientAnswer['task']> } | null = null;
  const parser = createParser({
    onEvent: (event) => {
      if (event.event !== 'task' || terminal) return;
      const task = JSON.parse(event.data) as NonNullable<ClientAnswer['task']>;
      if (task.completed_at) terminal = { answeredAt: clock(), task };
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    if (terminal) break;
  }
  await res.body.dump().catch(() => {});
  return terminal ?? { answeredAt: clock(), task: null };
}
