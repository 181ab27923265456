import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import type { Test } from 'tap';
import { providerRefusal } from './provider-rules.js';

/** One request as the fake provider received it. */
export interface ReceivedRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export interface JsonReply {
  status: number;
  headers?: Record<string, string>;
  json: unknown;
}

export type FakeReply =
  | JsonReply
  /** Never answers: the request stays open until the client gives up or `release` answers it. */
  | { hang: true };

/**
 * A model provider on loopback: records every request and answers from a script (one reply per
 * request, the last one repeated), except that a request the real provider would refuse gets its
 * refusal. Tests point the SDK's base URL at `url`.
 */
export class FakeUpstream {
  readonly requests: ReceivedRequest[] = [];
  /** Requests answered with the provider's refusal (test/helpers/provider-rules.ts). */
  readonly refused: ReceivedRequest[] = [];
  /** Requests whose connection the client closed before we answered. */
  abandoned = 0;
  private script: FakeReply[] = [];
  private served = 0;
  private waiters: { count: number; resolve: () => void }[] = [];
  private abandonWaiters: { count: number; resolve: () => void }[] = [];
  private readonly hanging = new Set<http.ServerResponse>();

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(t: Test): Promise<FakeUpstream> {
    let upstream!: FakeUpstream;
    const server = http.createServer((req, res) => upstream.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    upstream = new FakeUpstream(server, `http://127.0.0.1:${port}`);
    t.teardown(() => upstream.close());
    return upstream;
  }

  /** Replaces the script: the n-th request gets replies[n], later ones the last reply. */
  replyWith(...replies: FakeReply[]): void {
    this.script = replies;
    this.served = 0;
  }

  /** Resolves once `count` requests have arrived in all. */
  received(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  /** Resolves once `count` unanswered requests have been closed by the client. */
  abandonedCount(count: number): Promise<void> {
    if (this.abandoned >= count) return Promise.resolve();
    return new Promise((resolve) => this.abandonWaiters.push({ count, resolve }));
  }

  /** Answers every hanging request with `reply` (lets a test decide when a slow call ends). */
  release(reply: JsonReply): void {
    for (const res of this.hanging) send(res, reply);
    this.hanging.clear();
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      this.requests.push(request);
      res.on('close', () => {
        this.hanging.delete(res);
        if (!res.writableFinished) {
          this.abandoned += 1;
          this.notify(this.abandonWaiters, this.abandoned);
        }
      });
      // What the real provider would refuse is refused, whatever the script says (the script is not consumed).
      const refusal = await providerRefusal(request);
      if (refusal) {
        this.refused.push(request);
        send(res, refusal);
        this.notify(this.waiters, this.requests.length);
        return;
      }
      const reply = this.script[Math.min(this.served, this.script.length - 1)] ?? {
        status: 500,
        json: { error: 'no reply scripted' },
      };
      this.served += 1;
      if ('hang' in reply) this.hanging.add(res);
      else send(res, reply);
      this.notify(this.waiters, this.requests.length);
    });
  }

  private notify(waiters: { count: number; resolve: () => void }[], reached: number): void {
    for (const waiter of [...waiters]) {
      if (reached >= waiter.count) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  private async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function send(res: http.ServerResponse, reply: JsonReply): void {
  res.writeHead(reply.status, { 'content-type': 'application/json; charset=UTF-8', ...reply.headers });
  res.end(JSON.stringify(reply.json));
}

/** A PNG of one colour, base64, as providers return images. */
export async function pngBase64(width: number, height: number, background = '#3366cc'): Promise<string> {
  const png = await sharp({ create: { width, height, channels: 3, background } })
    .png()
    .toBuffer();
  return png.toString('base64');
}
