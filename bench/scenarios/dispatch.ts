/**
 * docs/design.md §5, embedded default: dispatch latency, create → generator called, with in-process
 * workers at light load (p50 ≤ 2 ms, p99 ≤ 10 ms).
 *
 * One text-to-image task at a time (1K, the smallest), each followed by a long-poll until it is
 * COMPLETED, on `serve` with its default in-process workers (one per core). "Generator called" is
 * read from what the service already records: a task's `started_at` is the clock reading of the
 * worker's claim, and for a task without image references the worker calls the generator straight
 * after the claim returns, with no I/O between (src/worker/task-worker.ts). The create's moment is
 * the client's wall clock just before it sends the request (bench/lib/wall-clock.ts; same machine,
 * same clock). `started_at` has whole milliseconds, so each latency lies in [started_at − sent,
 * started_at + 1 − sent): the report gives both ends. No bench-only code runs in the service.
 */
import { availableParallelism } from 'node:os';
import { Pool } from 'undici';
import type { DispatchResult } from '../lib/report.js';
import { percentilesOf } from '../lib/load.js';
import { wallClock } from '../lib/wall-clock.js';
import { textToImage } from '../lib/requests.js';
import { createTask, waitForTask, warmUp, type ScenarioContext } from './context.js';

const WARM_UP_TASKS = 5;

export async function dispatchScenario(ctx: ScenarioContext): Promise<DispatchResult> {
  const tasks = ctx.quick ? 40 : 200;
  const workers = availableParallelism();
  const { server, auth } = await ctx.launchService('service-dispatch', { WORKER_CONCURRENCY: String(workers) });
  ctx.log(
    `dispatch latency: ${tasks} text-to-image 1K tasks one at a time, create → started_at, ` +
      `then ?wait=30 until COMPLETED (${workers} in-process workers)`,
  );
  const pool = new Pool(server.url, { connections: 1 });
  try {
    await warmUp(pool, auth, WARM_UP_TASKS);
    const now = wallClock();
    const dispatch: number[] = [];
    const recorded: number[] = [];
    const completed: number[] = [];
    let notCompleted = 0;
    for (let i = 0; i < tasks; i++) {
      const body = textToImage('1K', WARM_UP_TASKS + i);
      const sentAt = now();
      const created = await createTask(pool, auth, body);
      const task = await waitForTask(pool, auth, created.task_id, 30);
      const answeredAt = now();
      if (task.status !== 'COMPLETED' || !task.started_at) {
        notCompleted++;
        continue;
      }
      const startedAt = Date.parse(task.started_at);
      dispatch.push(startedAt - sentAt);
      recorded.push(startedAt - Date.parse(task.created_at));
      completed.push(answeredAt - sentAt);
    }
    const result: DispatchResult = {
      tasks,
      workers,
      resolution: '1K 1:1',
      dispatchFromMs: percentilesOf(dispatch),
      recordedMs: percentilesOf(recorded),
      completedMs: percentilesOf(completed),
      notCompleted,
    };
    ctx.log(`  ${JSON.stringify(result)}`);
    return result;
  } finally {
    await pool.close();
    await ctx.stop(server);
  }
}
