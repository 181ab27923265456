// Not in the PostgreSQL pass: fetching a client metadata document, no store.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { clientDocumentReader } from '../../src/services/client-metadata-document.js';
import type { LookupAll } from '../../src/webhooks/ssrf-guard.js';

/**
 * Client ID metadata documents are URLs a client chooses: read through the SSRF guard, bounded in
 * size and time, no redirect followed. The reader's limits are its arguments, so the time limit is
 * tested with 200 ms rather than the service's 5 s.
 */

const LIMITS = { maxBytes: 1024, timeoutMs: 200 };

/** A loopback server answering with `handler`, closed when the test ends. */
async function documentHost(t: Test, handler: (request: IncomingMessage, response: ServerResponse) => void) {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const refusal = (pattern: RegExp) => ({ name: 'OAuthError', error: 'invalid_client', message: pattern });

t.test('a document is read and returned as an object', async (t) => {
  const origin = await documentHost(t, (request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify({ client_id: `${origin}${request.url}`, redirect_uris: ['https://app.example/cb'] }));
  });
  const reader = clientDocumentReader({ allowPrivate: true }, LIMITS);
  t.ok(reader.names(`${origin}/client.json`));
  t.match(await reader.read(`${origin}/client.json`), { client_id: `${origin}/client.json` });
});

t.test('only https URLs with a path name a document (http too where private addresses are allowed)', async (t) => {
  const strict = clientDocumentReader({ allowPrivate: false });
  t.ok(strict.names('https://app.example/oauth/client.json'));
  t.notOk(strict.names('http://app.example/oauth/client.json'));
  t.notOk(strict.names('https://app.example/'), 'a path is required');
  t.notOk(strict.names('https://app.example/client.json#x'));
  t.notOk(strict.names('01a242be-24c9-7519-91b4-0ed23030209b'), 'a registered id is not a URL');
});

t.test('an address that is not public is refused before any connection (the SSRF guard)', async (t) => {
  let connections = 0;
  const origin = await documentHost(t, (_request, response) => {
    connections++;
    response.end('{}');
  });
  const port = new URL(origin).port;
  const toLoopback: LookupAll = async () => [{ address: '127.0.0.1', family: 4 }];
  const reader = clientDocumentReader({ allowPrivate: false, lookup: toLoopback }, LIMITS);
  await t.rejects(reader.read(`https://client.example.test:${port}/client.json`), refusal(/refused/));
  await t.rejects(reader.read('https://169.254.169.254/latest/meta-data'), refusal(/non_public_address/));
  await t.rejects(reader.read('https://localhost/client.json'), refusal(/reserved_name/));
  t.equal(connections, 0);
});

t.test('a document larger than the limit, slower than the limit, redirected or not JSON is refused', async (t) => {
  const origin = await documentHost(t, (request, response) => {
    if (request.url === '/large') return response.end(`{"pad":"${'x'.repeat(2048)}"}`);
    if (request.url === '/large-chunked') {
      response.write('{"pad":"');
      response.write('x'.repeat(2048));
      return response.end('"}');
    }
    if (request.url === '/slow') return; // never answers
    if (request.url === '/redirect') {
      response.writeHead(302, { location: '/client.json' });
      return response.end();
    }
    if (request.url === '/array') return response.end('[]');
    response.end('<html>');
  });
  const reader = clientDocumentReader({ allowPrivate: true }, LIMITS);
  await t.rejects(reader.read(`${origin}/large`), refusal(/larger than 1024 bytes/));
  await t.rejects(reader.read(`${origin}/large-chunked`), refusal(/larger than 1024 bytes/));
  await t.rejects(reader.read(`${origin}/slow`), refusal(/timed out/));
  await t.rejects(reader.read(`${origin}/redirect`), refusal(/status 302/));
  await t.rejects(reader.read(`${origin}/array`), refusal(/not a JSON object/));
  await t.rejects(reader.read(`${origin}/html`), refusal(/not JSON/));
});
