import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** Starts the app on an ephemeral loopback port (closed by the app's own teardown). */
export async function listenOnLoopback(app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as AddressInfo).port;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** An open connection, for requests no HTTP client would send (malformed, stalled, cut short). */
export function openConnection(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Everything the server writes until it closes the connection, parsed as one response (null when it wrote nothing). */
export function responseUntilClose(socket: Socket): Promise<RawResponse | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.once('close', () => resolve(parseResponse(Buffer.concat(chunks).toString('latin1'))));
  });
}

/** Sends bytes exactly as given and reads until the server closes the connection. */
export async function rawRequest(port: number, bytes: string | Buffer): Promise<RawResponse | null> {
  const socket = await openConnection(port);
  const response = responseUntilClose(socket);
  socket.write(bytes);
  return response;
}

function parseResponse(text: string): RawResponse | null {
  if (text.length === 0) return null;
  const split = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(split + 4) };
}
