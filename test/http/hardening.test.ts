import { spawn } from 'node:child_process';
import { hostname, tmpdir } from 'node:os';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import t from 'tap';
import { buildTestApp, fileTestApp } from '../helpers/app.js';
import { loopbackPort } from '../helpers/listening.js';
import { BOUNDARY, multipartRequest } from '../helpers/multipart.js';
import { encodedImage } from '../helpers/images.js';
import { listenOnLoopback, openConnection, rawRequest, responseUntilClose } from '../helpers/raw-http.js';

const PROBLEM = /^application\/problem\+json/;
const UNKNOWN_TASK = '0190a0a0-0000-7000-8000-000000000000';

// One app for the file, each test with its own account; the HTTP timeouts are set when the server
// is made, so the tests of them share an app of that configuration.
const ctx = fileTestApp();
const withShortTimeouts = fileTestApp({ HTTP_HEADERS_TIMEOUT_MS: '100', HTTP_REQUEST_TIMEOUT_MS: '300' });

for (const path of ['/api/v1/images/generations', '/api/v1/account/ledger', '/api/v1/webhooks/deliveries']) {
  t.test(`${path}: limit=Infinity, 1e309, -Infinity and 1e400 are 400 out_of_range, not 500`, async (t) => {
    const { app, newAccount } = ctx();
    const { auth } = await newAccount();
    for (const limit of ['Infinity', '1e309', '-Infinity', '1e400']) {
      const res = await app.inject({ url: `${path}?limit=${limit}`, headers: auth });
      t.equal(res.statusCode, 400, limit);
      t.match(res.headers['content-type'], PROBLEM);
      t.match(
        res.json(),
        { code: 'invalid_request', errors: [{ pointer: '/limit', location: 'query', code: 'out_of_range' }] },
        limit,
      );
    }
  });
}

t.test('wait=Infinity or 1e400 is refused like wait=61, before the task is even looked up', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  for (const wait of ['Infinity', '1e400', '61']) {
    const res = await app.inject({ url: `/api/v1/images/generations/${UNKNOWN_TASK}?wait=${wait}`, headers: auth });
    t.equal(res.statusCode, 400, wait);
    t.match(
      res.json(),
      { code: 'invalid_request', errors: [{ pointer: '/wait', location: 'query', code: 'out_of_range' }] },
      wait,
    );
  }
});

t.test('a wrong method on a known path is 405 with Allow naming the methods the path takes', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  const cases: [string, string, string][] = [
    ['PUT', '/api/v1/account', 'GET, HEAD'],
    ['DELETE', '/api/v1/images/generations', 'GET, HEAD, POST'],
    ['PATCH', `/api/v1/media/${UNKNOWN_TASK}`, 'GET, HEAD, DELETE'],
    ['GET', `/api/v1/images/generations/${UNKNOWN_TASK}/cancel`, 'POST'],
  ];
  for (const [method, url, allow] of cases) {
    const res = await app.inject({ method: method as 'PUT', url, headers: auth });
    t.equal(res.statusCode, 405, `${method} ${url}`);
    t.equal(res.headers.allow, allow);
    t.match(res.headers['content-type'], PROBLEM);
    t.equal(res.json().code, 'method_not_allowed');
  }
  const unknown = await app.inject({ url: '/api/v1/nothing-here', headers: auth });
  t.equal(unknown.statusCode, 404);
  t.equal(unknown.json().code, 'not_found');
});

t.test('router errors (an undecodable path, an over-long id) are problem+json 400s', async (t) => {
  const { app, newAccount } = ctx();
  const { auth } = await newAccount();
  for (const url of [
    '/api/v1/images/generations/%ff',
    `/api/v1/images/generations/${'a'.repeat(150)}`,
    `/api/v1/media/${'9'.repeat(5000)}`,
  ]) {
    const res = await app.inject({ url, headers: auth });
    t.equal(res.statusCode, 400, url.slice(0, 60));
    t.match(res.headers['content-type'], PROBLEM);
    t.match(res.json(), { code: 'invalid_request', errors: [{ location: 'path' }] });
    t.ok(res.headers['x-request-id']);
  }
});

t.test("what Node's HTTP parser refuses is answered with problem+json and a stable code", async (t) => {
  const port = await loopbackPort(ctx().app);
  const cases: [string, string | Buffer, number, string][] = [
    ['a bad method', 'FR0B /api/v1/account HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'invalid_request'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /api/v1/images/estimates HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      'invalid_request',
    ],
    [
      'a bad chunk',
      'POST /api/v1/images/estimates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
      400,
      'invalid_request',
    ],
    [
      'NUL in a header',
      Buffer.from('GET /api/v1/account HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n', 'latin1'),
      400,
      'invalid_request',
    ],
    [
      'headers over 16 KB (a 100 KB cursor)',
      `GET /api/v1/images/generations?cursor=${'c'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      431,
      'headers_too_large',
    ],
  ];
  for (const [name, bytes, status, code] of cases) {
    const res = await rawRequest(port, bytes);
    t.ok(res, name);
    t.equal(res!.status, status, name);
    t.match(res!.headers['content-type'], PROBLEM, name);
    t.equal(res!.headers.connection, 'close', name);
    t.match(JSON.parse(res!.body), { code, status, type: `urn:imagegen:problem:${code}` }, name);
  }
});

t.test(
  'headers that do not arrive within HTTP_HEADERS_TIMEOUT_MS get 408 request_timeout and a closed connection',
  async (t) => {
    const port = await loopbackPort(withShortTimeouts().app);
    const socket = await openConnection(port);
    const response = responseUntilClose(socket);
    socket.write('GET /api/v1/account HTTP/1.1\r\nHost: x\r\n');
    const res = await response;
    t.equal(res?.status, 408);
    t.equal(JSON.parse(res!.body).code, 'request_timeout');
  },
);

t.test(
  'a body that does not arrive within HTTP_REQUEST_TIMEOUT_MS gets 408 request_timeout and a closed connection',
  async (t) => {
    const { app, newAccount } = withShortTimeouts();
    const { key } = await newAccount();
    const port = await loopbackPort(app);
    const socket = await openConnection(port);
    const response = responseUntilClose(socket);
    socket.write(
      `POST /api/v1/images/estimates HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":"alpha-pro",',
    );
    const res = await response;
    t.equal(res?.status, 408);
    t.match(res?.headers['content-type'], PROBLEM);
    t.equal(JSON.parse(res!.body).code, 'request_timeout');
  },
);

/** Sends the start of an upload whose body then stops; resolves once the server has read the part's headers. */
async function startStalledUpload(port: number, key: string) {
  const socket = await openConnection(port);
  const closed = responseUntilClose(socket);
  const head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`;
  socket.write(
    `POST /api/v1/media HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: 20000000\r\n\r\n${head}` +
      'x'.repeat(64 * 1024),
  );
  return { socket, closed };
}

async function spoolFiles(dataDir: string): Promise<string[]> {
  return (await readdir(join(dataDir, 'tmp')).catch(() => [])).filter((n) => n.startsWith('upload-'));
}

/** Spool files change as the handler runs, with no event to await from outside; looks until `done` or a deadline. */
async function spoolFilesOnce(dataDir: string, done: (names: string[]) => boolean): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  let names = await spoolFiles(dataDir);
  while (!done(names) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    names = await spoolFiles(dataDir);
  }
  return names;
}

t.test(
  'a stalled upload body: the server closes the socket after UPLOAD_IDLE_TIMEOUT_MS and removes its spool file',
  async (t) => {
    // An app of its own: a short idle timeout, and a spool directory no other test writes to.
    const { app, dataDir, newAccount } = await buildTestApp(t, { UPLOAD_IDLE_TIMEOUT_MS: '300' });
    const { key } = await newAccount();
    const port = await listenOnLoopback(app);
    const { closed } = await startStalledUpload(port, key);
    t.equal((await spoolFilesOnce(dataDir, (names) => names.length > 0)).length, 1, 'the upload is being spooled');
    await closed; // the server, not the client, ends the connection: the test never closes it
    t.same(await spoolFilesOnce(dataDir, (names) => names.length === 0), []);
  },
);

t.test('uploads in flight are capped per key (429) and per process (503), before the body is read', async (t) => {
  // An app of its own: caps of 1 and 2 uploads, and a spool directory no other test writes to.
  const { app, dataDir, newAccount } = await buildTestApp(t, {
    UPLOAD_MAX_IN_FLIGHT_PER_KEY: '1',
    UPLOAD_MAX_IN_FLIGHT: '2',
    UPLOAD_IDLE_TIMEOUT_MS: '60000',
  });
  const first = await newAccount();
  const second = await newAccount();
  const third = await newAccount();
  const port = await listenOnLoopback(app);
  const png = await encodedImage('png', 8, 8);
  const upload = (auth: { authorization: string }) =>
    fetch(`http://127.0.0.1:${port}/api/v1/media`, {
      method: 'POST',
      headers: { ...auth, ...multipartRequest([{ name: 'file', filename: 'a.png', data: png }]).headers },
      body: new Uint8Array(multipartRequest([{ name: 'file', filename: 'a.png', data: png }]).payload),
    });
  const stalled = await startStalledUpload(port, first.key);
  // The stalled upload holds its slot once the server has begun to spool it. Waiting for that first
  // matters where authentication takes I/O (PostgreSQL): a same-key upload sent at once could take
  // the slot before the stalled one reaches it, and the stalled one would be the one refused.
  t.equal((await spoolFilesOnce(dataDir, (names) => names.length === 1)).length, 1, 'the stalled upload is spooled');
  const sameKey = await upload(first.auth);
  t.equal(sameKey.status, 429);
  t.equal(sameKey.headers.get('retry-after'), '1');
  t.equal((await sameKey.json()).code, 'rate_limited');

  t.equal((await upload(second.auth)).status, 201, 'another key still has room');
  const stalledSecond = await startStalledUpload(port, second.key);
  t.equal((await spoolFilesOnce(dataDir, (names) => names.length === 2)).length, 2, 'both stalled uploads are spooled');
  const full = await upload(third.auth);
  t.equal(full.status, 503);
  t.equal((await full.json()).code, 'unavailable');
  t.ok(full.headers.get('retry-after'));

  stalled.socket.destroy();
  stalledSecond.socket.destroy();
  await Promise.all([stalled.closed, stalledSecond.closed]);
  let freed = await upload(third.auth);
  for (let i = 0; i < 100 && freed.status !== 201; i++) freed = await upload(third.auth);
  t.equal(freed.status, 201, 'the slots are given back when the uploads end');
});

t.test('spool files of a dead process are removed when an app starts; those of live processes stay', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'imagegen-spool-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const tmp = join(dataDir, 'tmp');
  await mkdir(tmp, { recursive: true });
  const child = spawn(process.execPath, ['-e', '']);
  const deadPid = child.pid!;
  await new Promise((resolve) => child.once('exit', resolve));
  const dead = `upload-${hostname()}-${deadPid}-${randomUUID()}`;
  const live = `upload-${hostname()}-${process.pid}-${randomUUID()}`;
  const otherHost = `upload-elsewhere-${deadPid}-${randomUUID()}`;
  for (const name of [dead, live, otherHost]) await writeFile(join(tmp, name), 'bytes');
  // An app of its own: what is tested is what an app does when it starts on this data directory.
  const { app } = await buildTestApp(t, { DATA_DIR: dataDir });
  await app.ready();
  t.same((await readdir(tmp)).sort(), [live, otherHost].sort());
});
