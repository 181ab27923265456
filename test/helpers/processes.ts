import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import type { Readable } from 'node:stream';
import type { Test } from 'tap';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { postgresTestUrl, testSchema } from './postgres.js';

/** tap's process-recording hook, as it appears in NODE_OPTIONS (quoted when its path has a space). */
const TAP_PROCESS_HOOK =
  /"--(?:import|loader|experimental-loader)=[^"]*@tapjs\/processinfo[^"]*"|--(?:import|loader|experimental-loader)=\S*@tapjs\/processinfo\S*/g;

/**
 * The command that runs node with args for a test, as [file, args] for spawn or execFile: through
 * env(1), which gives node this process's NODE_OPTIONS less tap's process-recording hook. tap puts
 * that hook into the NODE_OPTIONS of every process a test starts, whatever env the test passes; in a
 * CLI process it about doubles the CPU of the start-up, to record what nothing here reads (coverage
 * is off). env(1) executes node in its own place: the child's pid is node's, and signals reach it.
 */
export function nodeCommand(args: string[]): [string, string[]] {
  const options = (process.env.NODE_OPTIONS ?? '').replace(TAP_PROCESS_HOOK, '').trim();
  return ['/usr/bin/env', [`NODE_OPTIONS=${options}`, process.execPath, ...args]];
}

/**
 * A TypeScript entry point run as a real child process (through tsx), killed when the test ends
 * if it is still running; stdout is piped so the test can wait for what it prints.
 */
export function spawnTsChild(
  t: Test,
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcessByStdio<null, Readable, null> {
  const child = spawn(...nodeCommand(['--import', 'tsx', script, ...args]), {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  child.stdout.setEncoding('utf8');
  return child;
}

/** Resolves with everything printed so far once `marker` appears; rejects if the child exits first. */
export function waitForOutput(child: ChildProcessByStdio<null, Readable, null>, marker: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout.on('data', (chunk: string) => {
      output += chunk;
      if (output.includes(marker)) resolve(output);
    });
    child.once('exit', () => reject(new Error(`the process exited before printing "${marker}":\n${output}`)));
  });
}

/** A loopback port nothing listens on right now. */
/**
 * A loopback port nothing listens on, for a child process to listen on. Chosen below Linux's
 * ephemeral range (32768–60999), not by listen(0): a port from that range can be taken by any
 * outgoing connection of the parallel test files between this check and the child's listen, and
 * a worker once failed to start that way (EADDRINUSE). Here only another file's pick of the same
 * random port in the same instant could.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListenOn(port)) return port;
  }
}

async function canListenOn(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  return listening;
}

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

export type CliProcess = ChildProcess & {
  /** Everything it printed (stdout and stderr), once it has exited. */
  output: Promise<string>;
  /**
   * Resolves once marker has been printed; rejects if the process exits first, or prints failOn
   * first (a failure it logs and lives on after, which would otherwise leave the wait hanging).
   */
  printed(marker: string, options?: { failOn?: string }): Promise<void>;
};

/** The CLI (src/cli.ts through tsx) as a real process with env added to this one's; SIGKILLed when the test ends. */
export function startCli(t: Test, args: string[], env: Record<string, string>): CliProcess {
  const child = spawn(...nodeCommand(['--import', 'tsx', CLI, ...args]), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let text = '';
  const waiters: { marker: string; resolve: () => void }[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      text += chunk;
      for (const w of waiters.filter((w) => text.includes(w.marker))) w.resolve();
    });
  }
  const output = new Promise<string>((resolve) => child.once('exit', () => resolve(text)));
  const printed = (marker: string, { failOn }: { failOn?: string } = {}) =>
    new Promise<void>((resolve, reject) => {
      const failed = () => reject(new Error(`${args.join(' ')} printed ${failOn} before ${marker}:\n${text}`));
      if (text.includes(marker)) return resolve();
      if (failOn && text.includes(failOn)) return failed();
      waiters.push({ marker, resolve });
      if (failOn) waiters.push({ marker: failOn, resolve: failed });
      child.once('exit', () => reject(new Error(`${args.join(' ')} exited before printing ${marker}:\n${text}`)));
    });
  return Object.assign(child, { output, printed });
}

/**
 * The database a cluster of CLI processes shares: a PostgreSQL schema of the test's own, migrated,
 * and a store on it for the test to seed and check (closed when the test ends). `url` selects the
 * schema: it is the processes' DATABASE_URL.
 */
export async function clusterDatabase(
  t: Test,
  options: { poolSize?: number } = {},
): Promise<{ schema: string; url: string; store: PostgresStore }> {
  const { schema, url } = await testSchema(t);
  const store = new PostgresStore({ connectionString: postgresTestUrl(), schema, poolSize: options.poolSize ?? 2 });
  t.teardown(() => store.close());
  await store.migrate();
  return { schema, url, store };
}
