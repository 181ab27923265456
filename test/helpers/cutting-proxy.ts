import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Test } from 'tap';

/**
 * A loopback TCP proxy placed between the service and a dependency (PostgreSQL, an S3 server,
 * Redis), so that a test cuts the dependency as a failover, a restarted pooler or a network blip
 * would: every open connection reset at once, and new ones refused for a while. Not a mock: the
 * client library talks to the real server through it and sees the real failures.
 */
export interface CuttingProxy {
  /** host:port to give the client in place of the dependency's. */
  readonly address: string;
  readonly port: number;
  /** Connections passed through so far (each one a client connection to the dependency). */
  readonly connections: number;
  /** Resets (TCP RST) every open connection. */
  resetAll(): void;
  /** Resets every open connection and refuses (resets at once) new ones for ms. */
  cut(ms: number): void;
  /** Resolves once no connection is open (the clients closed theirs). */
  drained(): Promise<void>;
}

export async function startCuttingProxy(t: Test, target: { host: string; port: number }): Promise<CuttingProxy> {
  const open = new Set<Socket>();
  let onDrained: (() => void) | null = null;
  let refusingUntil = 0;
  let connections = 0;
  const server: Server = createServer((client) => {
    if (Date.now() < refusingUntil) {
      client.resetAndDestroy();
      return;
    }
    connections += 1;
    const upstream = createConnection(target);
    const pair = [client, upstream];
    for (const socket of pair) {
      open.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        open.delete(socket);
        if (open.size === 0) onDrained?.();
        for (const other of pair) if (!other.destroyed) other.resetAndDestroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const resetAll = () => {
    for (const socket of open) if (!socket.destroyed) socket.resetAndDestroy();
  };
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        resetAll();
        server.close(() => resolve());
      }),
  );
  return {
    address: `127.0.0.1:${port}`,
    port,
    get connections() {
      return connections;
    },
    resetAll,
    cut(ms: number) {
      refusingUntil = Date.now() + ms;
      resetAll();
    },
    drained() {
      if (open.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        onDrained = resolve;
      });
    },
  };
}
