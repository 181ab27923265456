// Not in the PostgreSQL pass: the static page, its assets and headers; no request reaches the store.
import t from 'tap';
import { consoleContentSecurityPolicy } from '../../src/http/routes/pages.js';
import { fileTestApp } from '../helpers/app.js';
import { assertPageServed, builtPage } from '../helpers/playground.js';

// One app serving the built console and Playground for the file's tests; CONSOLE=false is read
// when an app is built, so the test of it has an app of that configuration.
const consoleDir = await builtPage('console');
const playgroundDir = await builtPage('playground');
const ctx = fileTestApp({}, { consoleDir, playgroundDir });
const withoutConsole = fileTestApp({ CONSOLE: 'false' }, { consoleDir, playgroundDir });

t.test('GET /console: the page, its script, styles and icon, with the security headers', async (t) => {
  const { app } = ctx();
  const page = await assertPageServed(t, app, 'console');
  t.equal(
    page.headers['content-security-policy'],
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    'nothing from another origin: no image, no request',
  );
  t.equal(page.headers['content-security-policy'], consoleContentSecurityPolicy());
  t.match(page.body, '<label for="admin-key">', 'the key field has its label');
});

t.test('its assets are cached as the Playground’s are', async (t) => {
  const { app } = ctx();
  for (const asset of ['js', 'css']) {
    const own = await app.inject({ url: `/console/console.${asset}` });
    const playground = await app.inject({ url: `/playground/playground.${asset}` });
    t.equal(own.headers['cache-control'], playground.headers['cache-control'], asset);
  }
});

t.test('the console and the Playground share one stylesheet base and one charting bundle', async (t) => {
  const { app } = ctx();
  const [consoleCss, playgroundCss] = await Promise.all(
    ['/console/console.css', '/playground/playground.css'].map(async (url) => (await app.inject({ url })).body),
  );
  for (const variable of ['--ink: #1a1a1a', '--accent: #0b57d0', '--bad: #a50e0e'])
    t.ok(consoleCss.includes(variable) && playgroundCss.includes(variable), `both define ${variable}`);
  t.notMatch(consoleCss, /@import/, 'ui/base.css is bundled in, not fetched');
  const script = (await app.inject({ url: '/console/console.js' })).body;
  t.match(script, /BarController|"bar"/, 'Chart.js is bundled');
  t.notMatch(
    script,
    /DoughnutController|"doughnut"|"radar"/,
    'only the bar chart is registered: the rest is tree-shaken',
  );
});

t.test('CONSOLE=false: no page, the Playground still served', async (t) => {
  const { app } = withoutConsole();
  t.equal((await app.inject({ url: '/console' })).statusCode, 404);
  t.equal((await app.inject({ url: '/console/console.js' })).statusCode, 404);
  t.equal((await app.inject({ url: '/playground' })).statusCode, 200);
});
