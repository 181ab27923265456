import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';

/**
 * A small filesystem of the test's own (tmpfs), so that a disk-full case is a real ENOSPC from the
 * kernel: unmounted and removed when the test ends. Null where the test may not mount one (not
 * root, or a container without the capability): the caller skips, saying why.
 */
export function mountTmpfs(t: Test, sizeBytes: number): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'imagegen-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes}`, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  t.teardown(() => {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Whether this process may mount a tmpfs (asked once, with a throwaway mount). */
let mountable: boolean | null = null;
export function canMountTmpfs(): boolean {
  if (mountable === null) {
    const dir = mkdtempSync(join(tmpdir(), 'imagegen-tmpfs-probe-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=65536', 'tmpfs', dir], { stdio: 'ignore' });
      execFileSync('umount', [dir], { stdio: 'ignore' });
      mountable = true;
    } catch {
      mountable = false;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return mountable;
}
