// Not in the PostgreSQL pass: the links of GET / and the static answers they lead to; no request reaches the store.
import t from 'tap';
import { prefersHtml } from '../../src/http/routes/root.js';
import { fileTestApp } from '../helpers/app.js';

/** `GET /` tells where to go: JSON for API clients, a small page for browsers (by Accept). */
const fileApp = fileTestApp();

const EXPECTED = ['/docs', '/playground', '/openapi.json', '/openapi.yaml', '/mcp', '/api/v1', '/v1'];

t.test(
  'an API client gets JSON naming docs, playground, the OpenAPI document and MCP; each link answers',
  async (t) => {
    const { app } = fileApp();
    for (const accept of [undefined, '*/*', 'application/json', 'application/json, text/html;q=0.5']) {
      const res = await app.inject({ url: '/', headers: accept ? { accept } : {} });
      t.equal(res.statusCode, 200, `Accept ${accept}`);
      t.match(res.headers['content-type'], /^application\/json/, `Accept ${accept}: JSON`);
      t.match(res.headers.vary, /Accept/);
      const body = res.json();
      t.same(
        body.links.map((link: { href: string }) => link.href),
        EXPECTED,
      );
    }
    // /playground serves a built bundle, which the tests of this file do not build.
    for (const href of ['/docs', '/openapi.json', '/openapi.yaml']) {
      const res = await app.inject({ url: href });
      t.ok(res.statusCode === 200 || res.statusCode === 302, `${href} answers (${res.statusCode})`);
    }
  },
);

t.test('a browser gets an HTML page of the same links', async (t) => {
  const { app } = fileApp();
  const res = await app.inject({
    url: '/',
    headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
  });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/html/);
  for (const href of EXPECTED) t.match(res.body, `<a href="${href}">`, href);
});

t.test('the negotiation: HTML only when named above JSON', async (t) => {
  const cases: [string | undefined, boolean][] = [
    [undefined, false],
    ['*/*', false],
    ['text/*', false],
    ['application/json', false],
    ['text/html', true],
    ['application/xhtml+xml', true],
    ['text/html;q=0', false],
    ['text/html;q=0.5, application/json', false],
    ['text/html, application/json;q=0.9', true],
    ['TEXT/HTML', true],
  ];
  for (const [accept, html] of cases) t.equal(prefersHtml(accept), html, `${accept}`);
});

t.test('GET / is in the OpenAPI document with both representations', async (t) => {
  const { app } = fileApp();
  const document = (await app.inject({ url: '/openapi.json' })).json();
  const content = document.paths['/'].get.responses['200'].content;
  t.same(Object.keys(content).sort(), ['application/json', 'text/html']);
});
