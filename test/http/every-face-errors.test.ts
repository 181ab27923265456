import { connect } from 'node:net';
import t from 'tap';
import { fileTestApp } from '../helpers/app.js';

/**
 * Each face answers in its own dialect whatever fails, routing and Node's HTTP parser included:
 * problem+json under /api/v1 (and everywhere else), OpenAI's `{error: {…}}` under /v1. One app,
 * listening on loopback for the requests no HTTP client would send.
 */
const ctx = fileTestApp();
let port = 0;
t.before(async () => {
  await ctx().app.listen({ host: '127.0.0.1', port: 0 });
  port = (ctx().app.server.address() as { port: number }).port;
});

/** Sends raw bytes and reads the answer until the server closes the connection. */
function rawExchange(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      answer += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

const WRONG_METHODS = [
  { method: 'DELETE', url: '/api/v1/models', allow: 'GET, HEAD', face: 'native' },
  { method: 'QUERY', url: '/api/v1/models', allow: 'GET, HEAD', face: 'native' },
  { method: 'PROPFIND', url: '/api/v1/images/generations', allow: 'GET, HEAD, POST', face: 'native' },
  { method: 'DELETE', url: '/v1/models', allow: 'GET, HEAD', face: 'openai' },
  { method: 'PUT', url: '/v1/images/generations', allow: 'POST', face: 'openai' },
  { method: 'QUERY', url: '/v1/images/edits', allow: 'POST', face: 'openai' },
  { method: 'PATCH', url: '/mcp', allow: 'GET, HEAD, POST', face: 'native' },
] as const;

for (const { method, url, allow, face } of WRONG_METHODS) {
  t.test(`${method} ${url}: 405 with Allow, in the ${face} face's shape`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    // Without a Content-Type: a QUERY is refused for that by fastify before any route is sought.
    const res = await app.inject({ method: method as 'GET', url, headers: auth });
    t.equal(res.statusCode, 405);
    t.equal(res.headers.allow, allow);
    if (face === 'openai') {
      t.match(res.headers['content-type'], /^application\/json/);
      t.match(res.json(), { error: { type: 'invalid_request_error', code: 'method_not_allowed', param: null } });
    } else {
      t.match(res.headers['content-type'], /^application\/problem\+json/);
      t.match(res.json(), { status: 405, code: 'method_not_allowed' });
    }
  });
}

t.test('a path no face serves is 404 in the shape of the face it is under', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const openai = await app.inject({ method: 'POST', url: '/v1/audio/speech', headers: auth, payload: {} });
  t.equal(openai.statusCode, 404);
  t.match(openai.json(), { error: { type: 'invalid_request_error', code: 'not_found' } });
  const native = await app.inject({ method: 'QUERY' as 'GET', url: '/api/v1/nothing-here', headers: auth });
  t.equal(native.statusCode, 404);
  t.match(native.json(), { code: 'not_found' });
});

t.test("a request Node's parser refuses is answered in the shape of the face its path names", async (t) => {
  const badHeader = (path: string) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\nX-Bad: a\u0001b\r\n\r\n`;
  const openai = await rawExchange(badHeader('/v1/models'));
  t.match(openai, /^HTTP\/1\.1 400 /);
  t.match(openai, /\r\nContent-Type: application\/json; charset=utf-8\r\n/);
  const openaiBody = JSON.parse(openai.slice(openai.indexOf('\r\n\r\n') + 4));
  t.match(openaiBody, { error: { type: 'invalid_request_error', message: /not well-formed/ } });

  for (const request of [badHeader('/api/v1/models'), 'NOT HTTP AT ALL\r\n\r\n']) {
    const native = await rawExchange(request);
    t.match(native, /^HTTP\/1\.1 400 /);
    t.match(native, /\r\nContent-Type: application\/problem\+json; charset=utf-8\r\n/);
    t.match(JSON.parse(native.slice(native.indexOf('\r\n\r\n') + 4)), { code: 'invalid_request', status: 400 });
  }
});
