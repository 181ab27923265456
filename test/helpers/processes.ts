import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { createServer } from 'node:net';
import type { Readable } from 'node:stream';
import type { Test } from 'tap';

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
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
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
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
