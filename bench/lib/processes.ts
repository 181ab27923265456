import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

export const REPO_ROOT = new URL('../..', import.meta.url).pathname.replace(/\/$/, '');

/** How the service is started: the compiled dist (default, what production runs) or the sources via tsx. */
export type ServiceRuntime = 'dist' | 'tsx';

/** Environment for a bench service: unlimited rate limits and balance checks that never bite. */
export function serviceEnv(dataDir: string, overrides: Record<string, string> = {}): Record<string, string> {
  const inherited: Record<string, string> = {};
  // Only what a process needs to run; none of the service's own variables leak in from the shell.
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'NODE_OPTIONS']) {
    const value = process.env[name];
    if (value !== undefined) inherited[name] = value;
  }
  return {
    ...inherited,
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    WORKER_CONCURRENCY: '0',
    RATE_LIMIT_CREATES_PER_MIN: '1000000000',
    RATE_LIMIT_REQUESTS_PER_MIN: '1000000000',
    RATE_LIMIT_AUTH_FAILURES_PER_MIN: '1000000000',
    MAX_ACTIVE_TASKS: '1000000000',
    MALLOC_MMAP_THRESHOLD_: '131072',
    MALLOC_ARENA_MAX: '2',
    ...overrides,
  };
}

/** root: the checkout to run (another one, built, lets a run compare two versions side by side). */
export function cliCommand(runtime: ServiceRuntime, root = REPO_ROOT): { command: string; args: string[] } {
  return runtime === 'dist'
    ? { command: process.execPath, args: [join(root, 'dist/src/cli.js')] }
    : { command: process.execPath, args: ['--import', 'tsx', join(root, 'src/cli.ts')] };
}

/** Runs a CLI command to completion and returns its stdout. */
export async function runCli(
  runtime: ServiceRuntime,
  args: string[],
  env: Record<string, string>,
  root = REPO_ROOT,
): Promise<string> {
  const cli = cliCommand(runtime, root);
  const child = spawn(cli.command, [...cli.args, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`imagegen ${args.join(' ')} exited with ${code}: ${stderr.trim()}`);
  return stdout;
}

/** A new bench account with a large balance; its key is the last line of the CLI's output. */
export async function createBenchKey(
  runtime: ServiceRuntime,
  env: Record<string, string>,
  root = REPO_ROOT,
): Promise<{ key: string; accountId: string }> {
  const out = (await runCli(runtime, ['keys', 'create', '--name', 'bench', '--tokens', '100000000'], env, root))
    .trim()
    .split('\n');
  const key = out[out.length - 1].trim();
  const accountId = /Account (\S+)/.exec(out.join('\n'))?.[1];
  if (!key.startsWith('igk_') || !accountId) throw new Error(`unexpected keys create output: ${out.join('\n')}`);
  return { key, accountId };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ChildServer {
  name: string;
  pid: number;
  port: number;
  url: string;
  child: ChildProcess;
  /** SIGTERM, then wait for a clean exit. */
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  port: number;
  /** Where the child's stdout goes (its log lines). */
  logFile: string;
  /** Path that answers 200 once the server is up. */
  readyPath: string;
  /** How long the server may take to answer it; default 60 s. */
  readyTimeoutMs?: number;
}

export async function startChild(options: StartOptions): Promise<ChildServer> {
  const child = spawn(options.command, options.args, {
    cwd: REPO_ROOT,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(options.logFile);
  child.stdout!.pipe(log);
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
    log.write(chunk);
  });
  let exited = false;
  const exit = once(child, 'exit').then(() => {
    exited = true;
  });
  const url = `http://127.0.0.1:${options.port}`;
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) throw new Error(`${options.name} exited before it was ready: ${stderr.trim()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${options.name} did not become ready within ${readyTimeoutMs / 1000} s: ${stderr.trim()}`);
    }
    try {
      const res = await fetch(url + options.readyPath);
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    name: options.name,
    pid: child.pid!,
    port: options.port,
    url,
    child,
    async stop() {
      if (exited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exit;
      clearTimeout(timer);
      log.end();
    },
  };
}

export interface ServiceStartOptions {
  name: string;
  runtime: ServiceRuntime;
  /** The checkout to run; default this one. */
  root?: string;
  env: Record<string, string>;
  logFile: string;
}

export async function startService(options: ServiceStartOptions): Promise<ChildServer> {
  const port = await freePort();
  const cli = cliCommand(options.runtime, options.root);
  return startChild({
    name: options.name,
    command: cli.command,
    args: [...cli.args, 'serve'],
    env: { ...options.env, PORT: String(port) },
    port,
    logFile: options.logFile,
    readyPath: '/healthz',
  });
}

/** The bare fastify reference (bench/reference-server.ts); with staticRoot, also serving that directory under /static/. */
export async function startReference(logFile: string, staticRoot?: string): Promise<ChildServer> {
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    PORT: String(port),
    ...(staticRoot ? { STATIC_ROOT: staticRoot } : {}),
  };
  return startChild({
    name: 'reference',
    command: process.execPath,
    args: ['--import', 'tsx', join(REPO_ROOT, 'bench/reference-server.ts')],
    env,
    port,
    logFile,
    readyPath: '/healthz',
  });
}

/** A process without a port of its own (a `worker`): SIGTERM, then wait for a clean exit. */
export interface ChildProcessHandle {
  name: string;
  pid: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * `imagegen worker` with env, ready once it has logged "worker started" (env must keep LOG_LEVEL
 * at info or below for that); its output goes to logFile.
 */
export async function startWorkerProcess(options: ServiceStartOptions): Promise<ChildProcessHandle> {
  const cli = cliCommand(options.runtime, options.root);
  const child = spawn(cli.command, [...cli.args, 'worker'], {
    cwd: REPO_ROOT,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(options.logFile);
  child.stderr!.pipe(log, { end: false });
  const exit = once(child, 'exit');
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${options.name} did not log "worker started" within 60 s: ${output.slice(-2000)}`));
    }, 60_000);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      log.write(chunk);
      if (output.length < 100_000) output += chunk;
      if (output.includes('"msg":"worker started"')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`${options.name} exited before it was ready: ${output.slice(-2000)}`));
    });
  });
  return {
    name: options.name,
    pid: child.pid!,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exit;
      clearTimeout(timer);
      log.end();
    },
  };
}
