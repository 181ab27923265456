/**
 * docs/design.md §5, waiting: 5 000 concurrent `GET /images/generations/{id}?wait=60` add < 200 MiB RSS, and
 * each returns within 20 ms (p99) of its task's completion.
 *
 * `serve` with its default in-process workers (one per core). The client (undici, one socket per
 * request) creates 5 000 text-to-image 1K tasks plus a margin, then sends one long-poll per task,
 * newest task first, all at once. The workers complete the oldest tasks meanwhile, so the margin
 * keeps at least 5 000 requests waiting at the same moment (counted by the client: written to their
 * socket and not yet answered). RSS of the service is taken before the first long-poll (after a
 * warm-up that rendered and long-polled) and followed to the end: VmHWM, reset before, and 10 ms
 * VmRSS samples.
 *
 * Then the workers complete tasks for a while. Each task completed once every long-poll was on its
 * socket gives one wake-up: the client's wall clock at the answer minus the task's `completed_at`
 * (whole ms, rounded down, so the figure is an upper bound). Rendering 5 000 images on two cores
 * would take minutes, so the tasks still waiting after that are canceled through the API, which
 * ends their long-polls the same way (measured apart, not the budget's figure).
 *
 * With `via: 'event-stream'` the same run holds one `GET /images/generations/{id}/events` per task
 * instead (docs/design.md §5: "the same for 5 000 concurrent event streams"); its answer is the moment the
 * stream's terminal `task` event is parsed. A stream is open once its response head has arrived
 * (the service writes it when it holds the stream), and the completions measured are those after
 * every stream was open: a request written to its socket may wait seconds in the service's backlog
 * of 5 000 opens, and a task that completed meanwhile says how long the open took, not how fast an
 * open stream learns of a completion (decision 0029: that backlog was the p99 of seconds).
 *
 * The memory the budget judges is measured first, apart (heldMemory): the same number of waits on
 * a `serve` without workers, so that nothing but the waits grows it. In the run above the workers
 * render meanwhile, and rendering alone grows the process by tens of MiB over those seconds (its
 * V8 heap and libvips' buffers, before they are collected or reused); that growth is reported
 * beside it, not charged to the waits.
 */
import { availableParallelism } from 'node:os';
import { createParser } from 'eventsource-parser';
import { Pool, type Dispatcher } from 'undici';
import { percentilesOf } from '../lib/load.js';
import { memoryOf, mib, resetPeak, sampleRss } from '../lib/memory.js';
import { CREATE_PATH, textToImage } from '../lib/requests.js';
import type { LongPollResult, WakeUps } from '../lib/report.js';
import { wallClock } from '../lib/wall-clock.js';
import { createTask, warmUp, type ScenarioContext, type TaskResource } from './context.js';

export const LONG_POLLS = 5000;

export async function longPollScenario(
  ctx: ScenarioContext,
  via: 'long-poll' | 'event-stream' = 'long-poll',
): Promise<LongPollResult> {
  const polls = ctx.quick ? 1000 : LONG_POLLS;
  // Tasks the workers may complete while the long-polls are being sent (a few seconds at about
  // 50 renders a second on two loaded cores), so that `polls` are still waiting when the last is sent.
  const margin = ctx.quick ? 200 : 600;
  const completingMs = ctx.quick ? 3000 : 10_000;
  const workers = availableParallelism();
  const heldWaits = await heldMemory(ctx, via, polls);
  const { server, auth } = await ctx.launchService(
    via === 'long-poll' ? 'service-long-poll' : 'service-event-streams',
    {
      WORKER_CONCURRENCY: String(workers),
      SSE_MAX_STREAMS_PER_KEY: String(2 * (polls + margin)),
    },
  );
  const small = new Pool(server.url, { connections: 50 });
  const waiting = new Pool(server.url, {
    connections: polls + margin,
    pipelining: 1,
    // Thousands of connects at once overflow the listen backlog (511 in Node), and a refused SYN is
    // sent again after 1, 3, 7 … s: on a loaded machine past undici's default 10 s.
    connectTimeout: 60_000,
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
  });
  try {
    await warmUp(small, auth, 5);

    ctx.log(`long-poll: creating ${polls + margin} text-to-image 1K tasks (${workers} in-process workers)`);
    const created = await inParallel(polls + margin, 50, (i) => createTask(small, auth, textToImage('1K', 100 + i)));
    const ids = created.map((t) => t.task_id).reverse();

    const baseline = memoryOf(server.pid).rss;
    const hwmReset = resetPeak(server.pid);
    const sampler = sampleRss(server.pid, 10);
    const now = wallClock();
    // Event streams whose head has arrived (the service holds them) and that have not ended.
    let streamsOpen = 0;
    // Streams opened, or refused or failed before their head: when it reaches ids.length, none is on its way.
    let streamsSettled = 0;
    // Requests written to their socket and not yet answered (long-polls) or streams open, sampled:
    // how many wait at once.
    const held = () => (via === 'event-stream' ? streamsOpen : waiting.stats.running);
    let heldAtOnce = 0;
    const heldSampler = setInterval(() => (heldAtOnce = Math.max(heldAtOnce, held())), 10);
    const answers: { answeredAt: number; status: number | string; task: TaskResource | null }[] = [];
    ctx.log(
      `  sending ${ids.length} ${via === 'long-poll' ? 'long-polls (?wait=60)' : 'event streams'}, one socket each`,
    );
    const sendingStarted = now();
    const all = ids.map(async (id) => {
      let opened = false;
      try {
        if (via === 'event-stream') {
          const res = await waiting.request({ method: 'GET', path: `${CREATE_PATH}/${id}/events`, headers: auth });
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
        const res = await waiting.request({ method: 'GET', path: `${CREATE_PATH}/${id}?wait=60`, headers: auth });
        const answeredAt = now();
        const parsed = (await res.body.json()) as { data?: TaskResource };
        answers.push({ answeredAt, status: res.statusCode, task: parsed.data ?? null });
      } catch (error) {
        if (via === 'event-stream' && !opened) streamsSettled++;
        answers.push({ answeredAt: now(), status: (error as { code?: string }).code ?? String(error), task: null });
      }
    });
    // Until every request is written to a socket of its own (none queued in the pool or a client)
    // and, for event streams, every stream is open (or failed).
    await until(
      () =>
        waiting.stats.queued === 0 &&
        waiting.stats.pending === 0 &&
        (via === 'long-poll' || streamsSettled === ids.length),
      60_000,
    );
    const allWaitingAt = now();
    heldAtOnce = Math.max(heldAtOnce, held());
    const sendingMs = allWaitingAt - sendingStarted;
    ctx.log(
      `  ${via === 'long-poll' ? 'sent' : 'open'} in ${(sendingMs / 1000).toFixed(1)} s; ${held()} waiting, ${heldAtOnce} at most`,
    );

    ctx.log(`  letting the workers complete tasks for ${completingMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, completingMs));
    const completedByWorkers = answers.length;
    // The budget's memory is what the waiting long-polls hold; the cancels that end them next are
    // the bench's doing (thousands of requests and answers at once), so their peak is kept apart.
    const waitingPeak = Math.max(sampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);
    const endingSampler = sampleRss(server.pid, 10);

    const answered = new Set(answers.map((a) => a.task?.task_id));
    const stillWaiting = ids.filter((id) => !answered.has(id));
    ctx.log(`  ${completedByWorkers} answered; canceling the ${stillWaiting.length} tasks still waiting`);
    await inParallel(stillWaiting.length, 50, async (i) => {
      const path = `${CREATE_PATH}/${stillWaiting[i]}/cancel`;
      const res = await small.request({ method: 'POST', path, headers: auth });
      await res.body.dump();
    });
    await Promise.all(all);
    clearInterval(heldSampler);
    const endingPeak = Math.max(endingSampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);

    const statuses: Record<string, number> = {};
    for (const a of answers) {
      const key = a.task ? `${a.status} ${a.task.status}` : String(a.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
    // Wake-ups are measured for the tasks that ended once every long-poll was on its socket: one
    // still queued in the client when its task ended says nothing about waking.
    const wakeUps = (status: string): WakeUps => {
      const latencies = [];
      for (const { task, answeredAt } of answers) {
        const endedAt = task?.status === status && task.completed_at ? Date.parse(task.completed_at) : Number.NaN;
        if (endedAt >= Math.floor(allWaitingAt)) latencies.push(answeredAt - endedAt);
      }
      const { p50, p99, max } = percentilesOf(latencies);
      return { count: latencies.length, p50Ms: p50, p99Ms: p99, maxMs: max };
    };
    const result: LongPollResult = {
      held: heldWaits,
      requests: ids.length,
      workers,
      heldAtOnce,
      sendingSec: Math.round(sendingMs / 100) / 10,
      rssBaselineMiB: mib(baseline),
      rssPeakMiB: mib(waitingPeak),
      rssGrowthMiB: mib(waitingPeak - baseline),
      rssPeakWithCancelsMiB: mib(endingPeak),
      peakFrom: hwmReset ? 'VmHWM (reset before the first long-poll) and 10 ms VmRSS samples' : '10 ms VmRSS samples',
      completed: wakeUps('COMPLETED'),
      canceled: wakeUps('CANCELED'),
      statuses,
      notTerminal: answers.filter((a) => a.status !== 200 || !a.task?.completed_at).length,
    };
    ctx.log(`  ${JSON.stringify(result)}`);
    return result;
  } finally {
    await waiting.destroy();
    await small.close();
    await ctx.stop(server);
  }
}

/**
 * What `count` waits hold: a `serve` without workers, `count` tasks created, then one wait per task
 * on a socket of its own (a long-poll, or an event stream counted once its head arrived); RSS
 * before (after 2 s for the creates' garbage) and at peak until 2 s after every one is waiting
 * (VmHWM, reset before, and 10 ms VmRSS samples).
 */
async function heldMemory(
  ctx: ScenarioContext,
  via: 'long-poll' | 'event-stream',
  count: number,
): Promise<LongPollResult['held']> {
  const { server, auth } = await ctx.launchService(`service-${via}-held`, {
    WORKER_CONCURRENCY: '0',
    SSE_MAX_STREAMS_PER_KEY: String(2 * count),
  });
  const small = new Pool(server.url, { connections: 50 });
  const waiting = new Pool(server.url, {
    connections: count,
    pipelining: 1,
    connectTimeout: 60_000,
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
  });
  try {
    ctx.log(`  memory held: ${count} ${via}s on a service without workers`);
    const created = await inParallel(count, 50, (i) => createTask(small, auth, textToImage('1K', 100 + i)));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const baseline = memoryOf(server.pid).rss;
    const hwmReset = resetPeak(server.pid);
    const sampler = sampleRss(server.pid, 10);
    let open = 0;
    const all = created.map(async ({ task_id: id }) => {
      const path = via === 'event-stream' ? `${CREATE_PATH}/${id}/events` : `${CREATE_PATH}/${id}?wait=60`;
      try {
        const res = await waiting.request({ method: 'GET', path, headers: auth });
        open++;
        await res.body.dump();
      } catch {
        // Ended by the pool's destroy below.
      }
    });
    const waitingNow = () => (via === 'event-stream' ? open : waiting.stats.running);
    await until(() => waiting.stats.queued === 0 && waiting.stats.pending === 0 && waitingNow() >= count, 60_000);
    const waitingAtOnce = waitingNow();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const peak = Math.max(sampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);
    await waiting.destroy();
    await Promise.all(all);
    return {
      waiting: waitingAtOnce,
      rssBaselineMiB: mib(baseline),
      rssPeakMiB: mib(peak),
      rssGrowthMiB: mib(peak - baseline),
    };
  } finally {
    if (!waiting.destroyed) await waiting.destroy();
    await small.close();
    await ctx.stop(server);
  }
}

/** Reads an event stream until its terminal `task` event: when it was parsed, and the task. */
async function terminalTaskEvent(
  res: Dispatcher.ResponseData,
  now: () => number,
): Promise<{ answeredAt: number; task: TaskResource | null }> {
  let terminal: { answeredAt: number; task: TaskResource } | null = null;
  const parser = createParser({
    onEvent: (event) => {
      if (event.event !== 'task' || terminal) return;
      const task = JSON.parse(event.data) as TaskResource;
      if (task.completed_at) terminal = { answeredAt: now(), task };
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    if (terminal) break;
  }
  await res.body.dump().catch(() => {});
  return terminal ?? { answeredAt: now(), task: null };
}

/** Runs job(0 … count − 1), at most `limit` at once; results in index order. */
async function inParallel<T>(count: number, limit: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, count) }, async () => {
    while (next < count) {
      const i = next++;
      results[i] = await job(i);
    }
  });
  await Promise.all(lanes);
  return results;
}

async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('long-poll: the requests were not all sent in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
