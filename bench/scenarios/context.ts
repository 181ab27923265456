import type { Pool } from 'undici';
import type { ChildServer, ServiceRuntime } from '../lib/processes.js';
import { CREATE_PATH, textToImage } from '../lib/requests.js';

/** What bench/run.ts gives a scenario module: services to start and stop, and its log. */
export interface ScenarioContext {
  /**
   * A service (`serve`) on a fresh DATA_DIR of its own, with the bench's environment (limits that
   * never answer) plus overrides, and a key with a large balance.
   */
  launchService(name: string, overrides?: Record<string, string>): Promise<BenchService>;
  stop(server: ChildServer): Promise<void>;
  log(line: string): void;
  quick: boolean;
  /** How the service is run (dist or tsx), for a scenario that starts processes of its own. */
  runtime: ServiceRuntime;
  /** A directory of the run's own, removed at its end: data dirs and logs. */
  workDir: string;
}

export interface BenchService {
  server: ChildServer;
  auth: Record<string, string>;
  dataDir: string;
}

/** The fields of a task resource the scenarios read. */
export interface TaskResource {
  task_id: string;
  status: string;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  generated: { media_id: string; url: string }[];
}

type Auth = Record<string, string>;

/** POST a create through pool and return the task (throws unless 202). */
export async function createTask(pool: Pool, auth: Auth, body: string): Promise<TaskResource> {
  const headers = { ...auth, 'content-type': 'application/json' };
  const res = await pool.request({ method: 'POST', path: CREATE_PATH, headers, body });
  const parsed = (await res.body.json()) as { data: TaskResource };
  if (res.statusCode !== 202) throw new Error(`create: ${res.statusCode} ${JSON.stringify(parsed)}`);
  return parsed.data;
}

/** GET a task with `?wait=seconds` through pool (throws unless 200). */
export async function waitForTask(pool: Pool, auth: Auth, taskId: string, seconds: number): Promise<TaskResource> {
  const res = await pool.request({ method: 'GET', path: `${CREATE_PATH}/${taskId}?wait=${seconds}`, headers: auth });
  const parsed = (await res.body.json()) as { data: TaskResource };
  if (res.statusCode !== 200) throw new Error(`wait: ${res.statusCode} ${JSON.stringify(parsed)}`);
  return parsed.data;
}

/** Renders `count` 1K tasks one after another: the renderer, the worker and a long-poll's path warmed up. */
export async function warmUp(pool: Pool, auth: Auth, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const task = await createTask(pool, auth, textToImage('1K', i));
    await waitForTask(pool, auth, task.task_id, 30);
  }
}
