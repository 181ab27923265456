import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

/**
 * Podman for the container tests (test/deploy): the project's image built on a local stand-in of
 * its base (scripts/node-base-image.sh), containers on the host's network and loopback ports only.
 */

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** runc, cgroupfs and no default ulimits: what podman needs on machines like CI's. */
export const CONTAINERS_CONF = join(ROOT, 'test/deploy/containers.conf');
const env = { ...process.env, CONTAINERS_CONF };
export const TEST_IMAGE = 'localhost/imagegen:test';

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A command run to its end (never rejects: the caller reads the code). */
export function run(command: string, args: string[], options: { timeoutMs?: number; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env, cwd: options.cwd ?? ROOT, maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 600_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export async function podman(args: string[], options: { timeoutMs?: number } = {}): Promise<string> {
  const result = await run('podman', args, options);
  if (result.code !== 0)
    throw new Error(`podman ${args.join(' ')} exited ${result.code}: ${result.stderr.slice(-2000)}`);
  return result.stdout;
}

const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;

let readiness: Promise<string | false> | null = null;

/**
 * Why the container tests cannot run here (a line for the skip), or false. They run when
 * IMAGEGEN_CONTAINER_TESTS=1 (.ci/run runs them so once, after its Node.js 24 pass); podman, runc, mmdebstrap and
 * podman-compose are installed from Debian's packages when missing and this is root.
 */
export function containerTestsSkip(): Promise<string | false> {
  readiness ??= (async () => {
    if (process.env.IMAGEGEN_CONTAINER_TESTS !== '1')
      return 'container tests run with IMAGEGEN_CONTAINER_TESTS=1 (.ci/run runs them so once, after its Node.js 24 pass)';
    const tools = ['podman', 'runc', 'mmdebstrap', 'podman-compose'];
    if (!tools.every(has)) {
      if (process.getuid?.() !== 0 || !has('apt-get'))
        return `${tools.filter((c) => !has(c)).join(', ')} missing, and not root with apt-get to install them`;
      const install = [
        'install',
        '-y',
        '-q',
        'podman',
        'runc',
        'mmdebstrap',
        'podman-compose',
        'uidmap',
        'slirp4netns',
      ];
      const apt = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
      let result = spawnSync('apt-get', install, { env: apt, stdio: 'ignore', timeout: 600_000 });
      if (result.status !== 0) {
        spawnSync('apt-get', ['update', '-q'], { env: apt, stdio: 'ignore', timeout: 600_000 });
        result = spawnSync('apt-get', install, { env: apt, stdio: 'ignore', timeout: 600_000 });
      }
      if (!tools.every(has)) return `could not install ${tools.filter((c) => !has(c)).join(', ')} with apt-get`;
    }
    const info = await run('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}']);
    if (info.code !== 0) return `podman cannot run here: ${info.stderr.trim().split('\n').pop()}`;
    const probe = await run('podman', ['run', '--rm', '--network', 'host', await standInBase(), 'node', '--version']);
    if (probe.code !== 0) return `podman cannot start a container here: ${probe.stderr.trim().split('\n').pop()}`;
    return false;
  })().catch((error: unknown) => `podman cannot run here: ${(error as Error).message.split('\n')[0]}`);
  return readiness;
}

let base: Promise<string> | null = null;

/** The stand-in for node:24-bookworm-slim, built once per machine (cached by its inputs' hash). */
export function standInBase(): Promise<string> {
  base ??= run(join(ROOT, 'scripts/node-base-image.sh'), []).then((result) => {
    if (result.code !== 0) throw new Error(`scripts/node-base-image.sh failed: ${result.stderr.slice(-2000)}`);
    return result.stdout.trim().split('\n').pop()!;
  });
  return base;
}

let image: Promise<{ name: string; buildSeconds: number }> | null = null;

/** The project's image, built from this checkout on the stand-in base; podman's layer cache makes a rebuild quick. */
export function testImage(): Promise<{ name: string; buildSeconds: number }> {
  image ??= (async () => {
    const nodeImage = await standInBase();
    const started = Date.now();
    await podman(
      [
        'build',
        '--format',
        'docker',
        '--network',
        'host',
        '--build-arg',
        `NODE_IMAGE=${nodeImage}`,
        '-t',
        TEST_IMAGE,
        '.',
      ],
      { timeoutMs: 900_000 },
    );
    return { name: TEST_IMAGE, buildSeconds: Math.round((Date.now() - started) / 1000) };
  })();
  return image;
}

/** A name prefix of the test's own; every container, pod and volume under it is removed when the test ends. */
export function containerNames(t: Test): (suffix: string) => string {
  const prefix = `imagegen-test-${randomBytes(3).toString('hex')}`;
  t.teardown(async () => {
    const containers = (await run('podman', ['ps', '-aq', '--filter', `name=^${prefix}`])).stdout
      .split('\n')
      .filter(Boolean);
    if (containers.length) await run('podman', ['rm', '-f', '-t', '0', ...containers]);
    const pods = (await run('podman', ['pod', 'ps', '-q', '--filter', `name=^${prefix}`])).stdout
      .split('\n')
      .filter(Boolean);
    if (pods.length) await run('podman', ['pod', 'rm', '-f', ...pods]);
    const volumes = (await run('podman', ['volume', 'ls', '-q', '--filter', `name=^${prefix}`])).stdout
      .split('\n')
      .filter(Boolean);
    if (volumes.length) await run('podman', ['volume', 'rm', '-f', ...volumes]);
  });
  return (suffix) => `${prefix}-${suffix}`;
}

/** Runs the image detached on the host network, read-only with a tmpfs /tmp, as the deployments do. */
export async function runContainer(
  name: string,
  args: string[],
  environment: Record<string, string>,
  options: { volume?: string; image?: string } = {},
): Promise<void> {
  const flags = ['run', '-d', '--name', name, '--network', 'host', '--read-only', '--tmpfs', '/tmp'];
  if (options.volume) flags.push('-v', `${options.volume}:/data`);
  for (const [key, value] of Object.entries(environment)) flags.push('-e', `${key}=${value}`);
  await podman([...flags, options.image ?? TEST_IMAGE, ...args]);
}

/** Waits for the container to exit; its exit code. */
export async function waitExit(name: string, timeoutMs = 120_000): Promise<number> {
  const out = await podman(['wait', name], { timeoutMs });
  return Number(out.trim());
}

/** Polls `url` until it answers 200. */
export async function waitHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export const logsOf = async (name: string) => {
  const result = await run('podman', ['logs', name]);
  return result.stdout + result.stderr;
};

export const pathExists = existsSync;

let services: Promise<string> | null = null;

/**
 * Stand-ins for the compose stack's registry images, from Debian's and the npm registry's packages
 * on the same stand-in base: PostgreSQL and redis-server (Debian's), s3rver for the S3 store. One
 * image, named by its base and recipe, built once per machine.
 */
export function servicesStandIn(): Promise<string> {
  services ??= (async () => {
    const nodeImage = await standInBase();
    const recipe = [
      `FROM ${nodeImage}`,
      'RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql redis-server curl && rm -rf /var/lib/apt/lists/*',
      'RUN npm install -g --no-audit --no-fund s3rver@3.7.1 && npm cache clean --force',
      'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    ].join('\n');
    const { createHash } = await import('node:crypto');
    const name = `localhost/imagegen-compose-services:${createHash('sha256').update(recipe).digest('hex').slice(0, 16)}`;
    if ((await run('podman', ['image', 'exists', name])).code === 0) return name;
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'imagegen-services-'));
    writeFileSync(join(dir, 'Containerfile'), `${recipe}\n`);
    await podman(['build', '--network', 'host', '-t', name, dir], { timeoutMs: 900_000 });
    return name;
  })();
  return services;
}
