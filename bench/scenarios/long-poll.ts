/**
 * docs/design.md §5, waiting: 5 000 concurrent `GET /images/generations/{id}?wait=60` add < 200 MiB RSS, and
 * each returns within 20 ms (p99) of its task's completion.
 *
 * `serve` with its default in-process workers (one per core). The driver creates 5 000 text-to-image
 * 1K tasks plus a margin; a client in a process of its own (bench/lib/waiting-client.ts: undici, one
 * socket per request, nothing else to do) then sends one long-poll per task, newest task first, all
 * at once, and times the answers. The workers complete the oldest tasks meanwhile, so the margin
 * keeps at least 5 000 requests waiting at the same moment (counted by the client: written to their
 * socket and not yet answered). RSS of the service is taken before the first long-poll (after a
 * warm-up that rendered and long-polled) and followed to the end: VmHWM, reset before, and 10 ms
 * VmRSS samples.
 *
 * Then the workers complete tasks for a while. Each task completed once every long-poll was on its
 * socket, and before the cancels below begin, gives one wake-up: the client's wall clock at the
 * answer minus the task's `completed_at` (whole ms, rounded down, so the figure is an upper bound).
 * The client's own GC pauses in that window are reported beside it. Rendering 5 000 images on two cores
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
import { Pool } from 'undici';
import { percentilesOf } from '../lib/load.js';
import { memoryOf, mib, resetPeak, sampleRss } from '../lib/memory.js';
import { CREATE_PATH, textToImage } from '../lib/requests.js';
import type { LongPollResult, WakeUps } from '../lib/report.js';
import { WaitingClient, type WaitVia } from '../lib/waiting-client.js';
import { wallClock } from '../lib/wall-clock.js';
import { createTask, warmUp, type ScenarioContext } from './context.js';

export const LONG_POLLS = 5000;

export async function longPollScenario(ctx: ScenarioContext, via: WaitVia = 'long-poll'): Promise<LongPollResult> {
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
  const waiting = await WaitingClient.start();
  try {
    await warmUp(small, auth, 5);

    ctx.log(`long-poll: creating ${polls + margin} text-to-image 1K tasks (${workers} in-process workers)`);
    const created = await inParallel(polls + margin, 50, (i) => createTask(small, auth, textToImage('1K', 100 + i)));
    const ids = created.map((t) => t.task_id).reverse();

    const baseline = memoryOf(server.pid).rss;
    const hwmReset = resetPeak(server.pid);
    const sampler = sampleRss(server.pid, 10);
    ctx.log(
      `  sending ${ids.length} ${via === 'long-poll' ? 'long-polls (?wait=60)' : 'event streams'}, one socket each, from a process of their own`,
    );
    const now = wallClock();
    const sendingStarted = now();
    const sent = await waiting.hold(
      server.url,
      auth,
      ids.map((id) => waitPath(via, id)),
      via,
    );
    ctx.log(
      `  ${via === 'long-poll' ? 'sent' : 'open'} in ${(sent.sendingMs / 1000).toFixed(1)} s; ${sent.waiting} on their sockets, ${sent.heldAtOnce} at most`,
    );
    // A request on its socket may still be in the service's backlog of thousands of arrivals; a task
    // that completes meanwhile times that backlog, not a wake-up (the same reason the streams are
    // counted once open, above). The window begins once the service holds every wait not answered.
    const heldByService = await untilServiceHolds(server.url, ids.length, waiting);
    const allWaitingAt = now();
    const sendingMs = allWaitingAt - sendingStarted;
    const heldAtOnce = Math.max(sent.heldAtOnce, heldByService);
    ctx.log(`  the service holds ${heldByService} waits after ${(sendingMs / 1000).toFixed(1)} s`);

    ctx.log(`  letting the workers complete tasks for ${completingMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, completingMs));
    const answeredByWorkers = new Set(await waiting.answeredTaskIds());
    const cancelsBeganAt = now();
    // The budget's memory is what the waiting long-polls hold; the cancels that end them next are
    // the bench's doing (thousands of requests and answers at once), so their peak is kept apart.
    const waitingPeak = Math.max(sampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);
    const endingSampler = sampleRss(server.pid, 10);

    const stillWaiting = ids.filter((id) => !answeredByWorkers.has(id));
    ctx.log(`  ${answeredByWorkers.size} answered; canceling the ${stillWaiting.length} tasks still waiting`);
    await inParallel(stillWaiting.length, 50, async (i) => {
      const path = `${CREATE_PATH}/${stillWaiting[i]}/cancel`;
      const res = await small.request({ method: 'POST', path, headers: auth });
      await res.body.dump();
    });
    const { answers, gcPauses } = await waiting.settle();
    const endingPeak = Math.max(endingSampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);

    const statuses: Record<string, number> = {};
    for (const a of answers) {
      const key = a.task ? `${a.status} ${a.task.status}` : String(a.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
    }
    // Wake-ups are measured for the tasks that ended while every long-poll was on its socket: one
    // still queued in the client when its task ended says nothing about waking, and one completed
    // once the cancels below had begun met thousands of answers written at once (the bench's doing,
    // not the budget's scenario: those were the p99's worst answers, at 37–67 ms, on 2026-11-28).
    // The canceled tasks are measured from the first cancel on, apart.
    const wakeUps = (status: string, from: number, until = Number.POSITIVE_INFINITY): WakeUps => {
      const latencies = [];
      for (const { task, answeredAt } of answers) {
        const endedAt = task?.status === status && task.completed_at ? Date.parse(task.completed_at) : Number.NaN;
        if (endedAt >= Math.floor(from) && endedAt < until) latencies.push(answeredAt - endedAt);
      }
      const { p50, p99, max } = percentilesOf(latencies);
      return { count: latencies.length, p50Ms: p50, p99Ms: p99, maxMs: max };
    };
    // From the moment every wait was on its socket: the client's forced collection just before is not counted.
    const windowPauses = gcPauses.filter((p) => p.at >= allWaitingAt && p.at < cancelsBeganAt).map((p) => p.ms);
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
      completed: wakeUps('COMPLETED', allWaitingAt, cancelsBeganAt),
      canceled: wakeUps('CANCELED', cancelsBeganAt),
      clientGcPauses: {
        count: windowPauses.length,
        maxMs: Math.round(Math.max(0, ...windowPauses) * 10) / 10,
        totalMs: Math.round(windowPauses.reduce((sum, ms) => sum + ms, 0) * 10) / 10,
      },
      statuses,
      notTerminal: answers.filter((a) => a.status !== 200 || !a.task?.completed_at).length,
    };
    ctx.log(`  ${JSON.stringify(result)}`);
    return result;
  } finally {
    await waiting.close();
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
async function heldMemory(ctx: ScenarioContext, via: WaitVia, count: number): Promise<LongPollResult['held']> {
  const { server, auth } = await ctx.launchService(`service-${via}-held`, {
    WORKER_CONCURRENCY: '0',
    SSE_MAX_STREAMS_PER_KEY: String(2 * count),
  });
  const small = new Pool(server.url, { connections: 50 });
  const waiting = await WaitingClient.start();
  try {
    ctx.log(`  memory held: ${count} ${via}s on a service without workers`);
    const created = await inParallel(count, 50, (i) => createTask(small, auth, textToImage('1K', 100 + i)));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const baseline = memoryOf(server.pid).rss;
    const hwmReset = resetPeak(server.pid);
    const sampler = sampleRss(server.pid, 10);
    const held = await waiting.hold(
      server.url,
      auth,
      created.map((task) => waitPath(via, task.task_id)),
      via,
    );
    await untilServiceHolds(server.url, count, waiting);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const peak = Math.max(sampler.stop().peak, hwmReset ? memoryOf(server.pid).hwm : 0);
    return {
      waiting: held.waiting,
      rssBaselineMiB: mib(baseline),
      rssPeakMiB: mib(peak),
      rssGrowthMiB: mib(peak - baseline),
    };
  } finally {
    await waiting.close();
    await small.close();
    await ctx.stop(server);
  }
}

/**
 * Until the service holds every wait not yet answered (its `imagegen_task_waits`): how many it
 * holds then.
 */
async function untilServiceHolds(origin: string, requests: number, client: WaitingClient): Promise<number> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    const held = Number(/^imagegen_task_waits (\d+)$/m.exec(metrics)?.[1] ?? Number.NaN);
    if (Number.isNaN(held)) throw new Error('long-poll: /metrics has no imagegen_task_waits');
    if (held + (await client.answeredTaskIds()).length >= requests) return held;
    if (Date.now() > deadline) throw new Error(`long-poll: the service held ${held} of ${requests} waits after 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The request that waits for a task: a long-poll or its event stream. */
function waitPath(via: WaitVia, taskId: string): string {
  return via === 'event-stream' ? `${CREATE_PATH}/${taskId}/events` : `${CREATE_PATH}/${taskId}?wait=60`;
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
