/**
 * A loopback model provider in a process of its own (bench/lib/provider-process.ts), for a latency
 * timed up to the moment the provider has a call: the arrivals come back on the bench's wall clock.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { CapacityProviderOptions } from '../../test/helpers/capacity-provider.js';
import type { ProviderProcessMessage } from './provider-process.js';

export class LoopbackProvider {
  /** When each call arrived, in order, on the bench's wall clock (bench/lib/wall-clock.ts). */
  readonly receivedAt: number[] = [];
  private waiters: { count: number; resolve: () => void }[] = [];

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.on('message', (message: ProviderProcessMessage) => {
      if (message.type !== 'call') return;
      this.receivedAt.push(message.receivedAt);
      const ready = this.waiters.filter((waiter) => waiter.count <= this.receivedAt.length);
      this.waiters = this.waiters.filter((waiter) => waiter.count > this.receivedAt.length);
      for (const waiter of ready) waiter.resolve();
    });
  }

  /** Starts the provider's process (under the bench's own loader) and waits until it listens. */
  static async start(options: CapacityProviderOptions): Promise<LoopbackProvider> {
    const script = fileURLToPath(new URL('./provider-process.ts', import.meta.url));
    const child = spawn(process.execPath, [...process.execArgv, script, JSON.stringify(options)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const [listening] = (await once(child, 'message')) as [ProviderProcessMessage];
    if (listening.type !== 'listening') throw new Error(`loopback provider: unexpected ${listening.type}`);
    return new LoopbackProvider(child, listening.url);
  }

  /** Resolves once `count` calls have arrived. */
  received(count: number): Promise<void> {
    if (this.receivedAt.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || !this.child.connected) return;
    this.child.disconnect();
    await once(this.child, 'exit');
  }
}
