// Not in the PostgreSQL pass: signing and sending one webhook, no store.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret, sendWebhook } from '../../src/webhooks/send-webhook.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';

interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on loopback that records every request it gets. */
async function startReceiver(
  t: Test,
  respond: (request: ReceivedRequest, response: ServerResponse) => void = (_, response) => response.end('thanks'),
) {
  const received: ReceivedRequest[] = [];
  const server = createServer(async (request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const entry = {
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers,
      body: Buffer.concat(chunks).toString('utf8'),
    };
    received.push(entry);
    respond(entry, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  return { port, url: `http://127.0.0.1:${port}/hook`, received };
}

/** Stub DNS answering every name with loopback, counting the questions. */
function loopbackLookup() {
  const asked: string[] = [];
  const lookup: LookupAll = async (hostname) => {
    asked.push(hostname);
    return [{ address: '127.0.0.1', family: 4 }];
  };
  return { lookup, asked };
}

const BODY = JSON.stringify({
  type: 'image.generation.completed',
  timestamp: '2030-01-01T00:00:00Z',
  data: { id: 't_1' },
});

function attemptTo(url: string, overrides: Partial<Parameters<typeof sendWebhook>[0]> = {}) {
  return sendWebhook({
    url,
    webhookId: 'msg_2n8bqXJ6',
    timestamp: new Date(),
    body: BODY,
    secrets: [generateWebhookSecret()],
    allowPrivate: true,
    ...overrides,
  });
}

function webhookHeaders(request: ReceivedRequest) {
  return {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  };
}

// Changes one character so the value stays the same length and kind.
const flipLastChar = (value: string) => value.slice(0, -1) + (value.endsWith('1') ? '2' : '1');

t.test('POSTs the body with Standard Webhooks headers that verify', async (t) => {
  const receiver = await startReceiver(t);
  const secret = generateWebhookSecret();
  const timestamp = new Date();
  const result = await attemptTo(receiver.url, { secrets: [secret], timestamp });

  t.match(result, { ok: true, statusCode: 200, error: null, responseSnippet: 'thanks', stop: false });
  t.equal(receiver.received.length, 1);
  const [request] = receiver.received;
  t.equal(request.method, 'POST');
  t.equal(request.body, BODY);
  t.equal(request.headers['content-type'], 'application/json');
  t.equal(request.headers['webhook-id'], 'msg_2n8bqXJ6');
  t.equal(request.headers['webhook-timestamp'], String(Math.floor(timestamp.getTime() / 1000)));
  t.match(request.headers['user-agent'], /\S/);
  t.same(new Webhook(secret).verify(request.body, webhookHeaders(request)), JSON.parse(BODY));
});

t.test('signature matches HMAC-SHA256 of id.timestamp.body computed independently', async (t) => {
  const receiver = await startReceiver(t);
  const secret = generateWebhookSecret();
  await attemptTo(receiver.url, { secrets: [secret] });
  const [request] = receiver.received;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signedContent = `${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`;
  const expected = createHmac('sha256', key).update(signedContent).digest('base64');
  t.equal(request.headers['webhook-signature'], `v1,${expected}`);
});

t.test('changing one byte of body, id or timestamp fails verification', async (t) => {
  const receiver = await startReceiver(t);
  const secret = generateWebhookSecret();
  await attemptTo(receiver.url, { secrets: [secret] });
  const [request] = receiver.received;
  const headers = webhookHeaders(request);
  const webhook = new Webhook(secret);

  t.throws(() => webhook.verify(request.body.replace('t_1', 't_2'), headers), /No matching signature/, 'body');
  t.throws(
    () => webhook.verify(request.body, { ...headers, 'webhook-id': flipLastChar(headers['webhook-id']) }),
    /No matching signature/,
    'id',
  );
  t.throws(
    () => webhook.verify(request.body, { ...headers, 'webhook-timestamp': flipLastChar(headers['webhook-timestamp']) }),
    /No matching signature/,
    'timestamp',
  );
  t.throws(
    () => new Webhook(generateWebhookSecret()).verify(request.body, headers),
    /No matching signature/,
    'other key',
  );
});

t.test('two secrets during rotation give two signatures, each verifying', async (t) => {
  const receiver = await startReceiver(t);
  const oldSecret = generateWebhookSecret();
  const newSecret = generateWebhookSecret();
  await attemptTo(receiver.url, { secrets: [oldSecret, newSecret] });
  const [request] = receiver.received;
  const signatures = String(request.headers['webhook-signature']).split(' ');
  t.equal(signatures.length, 2);
  t.ok(signatures.every((signature) => signature.startsWith('v1,')));
  for (const secret of [oldSecret, newSecret]) {
    t.doesNotThrow(() => new Webhook(secret).verify(request.body, webhookHeaders(request)));
  }
});

t.test('500 is a failure with its status code', async (t) => {
  const receiver = await startReceiver(t, (_, response) => {
    response.statusCode = 500;
    response.end('boom');
  });
  t.match(await attemptTo(receiver.url), {
    ok: false,
    statusCode: 500,
    error: null,
    responseSnippet: 'boom',
    stop: false,
  });
});

t.test('a redirect is a failure and is not followed', async (t) => {
  const receiver = await startReceiver(t, (request, response) => {
    if (request.path === '/hook') {
      response.writeHead(302, { location: `http://127.0.0.1:${receiver.port}/elsewhere` });
    }
    response.end();
  });
  t.match(await attemptTo(receiver.url), { ok: false, statusCode: 302, stop: false });
  t.same(
    receiver.received.map((request) => request.path),
    ['/hook'],
  );
});

t.test('410 Gone stops retries', async (t) => {
  const receiver = await startReceiver(t, (_, response) => {
    response.statusCode = 410;
    response.end();
  });
  t.match(await attemptTo(receiver.url), { ok: false, statusCode: 410, stop: true });
});

t.test('a receiver that never answers times out', async (t) => {
  const receiver = await startReceiver(t, () => {});
  const result = await attemptTo(receiver.url, { timeoutMs: 200 });
  t.match(result, { ok: false, statusCode: null, error: 'timeout', responseSnippet: null, stop: false });
  t.ok(result.durationMs >= 190, `took ${result.durationMs} ms`);
});

t.test('reads at most 4 KiB of a large response body', async (t) => {
  const receiver = await startReceiver(t, (_, response) => response.end('x'.repeat(1024 * 1024)));
  const result = await attemptTo(receiver.url);
  t.match(result, { ok: true, statusCode: 200 });
  t.equal(Buffer.byteLength(result.responseSnippet ?? ''), 4096);
});

t.test('a custom lookup is used for the connection', async (t) => {
  const receiver = await startReceiver(t);
  const { lookup, asked } = loopbackLookup();
  const result = await attemptTo(`http://rebind.example.test:${receiver.port}/hook`, { lookup });
  t.match(result, { ok: true, statusCode: 200 });
  t.same(asked, ['rebind.example.test']);
  t.equal(receiver.received[0].headers.host, `rebind.example.test:${receiver.port}`);
});

t.test('a name resolving to loopback at connect time is refused when private targets are not allowed', async (t) => {
  const receiver = await startReceiver(t);
  const { lookup, asked } = loopbackLookup();
  const result = await attemptTo(`http://rebind.example.test:${receiver.port}/hook`, { allowPrivate: false, lookup });
  t.match(result, { ok: false, statusCode: null, error: /127\.0\.0\.1.*not allowed/, stop: false });
  t.same(asked, ['rebind.example.test'], 'refused after the connect-time lookup');
  t.same(receiver.received, [], 'the receiver saw no request');
});

t.test('a loopback IP literal is refused at connect time when private targets are not allowed', async (t) => {
  const receiver = await startReceiver(t);
  const result = await attemptTo(receiver.url, { allowPrivate: false });
  t.match(result, { ok: false, statusCode: null, error: /not allowed/ });
  t.same(receiver.received, []);
});

t.test('a refused connection is returned, not thrown', async (t) => {
  const receiver = createServer();
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as AddressInfo;
  await new Promise((resolve) => receiver.close(resolve));
  t.match(await attemptTo(`http://127.0.0.1:${port}/hook`), { ok: false, statusCode: null, error: /ECONNREFUSED/ });
});

t.test('a non-http URL is a failure, not a request', async (t) => {
  t.match(await attemptTo('file:///etc/passwd'), { ok: false, statusCode: null, error: /scheme/ });
});

t.test('generated secrets are whsec_ + base64 of 32 random bytes that standardwebhooks accepts', async (t) => {
  const secret = generateWebhookSecret();
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  t.equal(Buffer.from(secret.slice('whsec_'.length), 'base64').length, 32);
  t.doesNotThrow(() => new Webhook(secret));
  t.not(generateWebhookSecret(), secret);
});
