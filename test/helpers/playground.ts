import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Page } from 'playwright-core';
import tap, { type Test } from 'tap';
import { buildPage } from '../../scripts/build-pages.js';
import type { BuiltPage } from '../../src/http/routes/pages.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp, type TestApp, type TestAppOptions } from './app.js';
import { launchChromium } from './chromium.js';
import { freePort } from './processes.js';

/** Screenshots are kept after the run (SCREENSHOT_DIR, else a fixed directory under the temp dir). */
export const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? join(tmpdir(), 'imagegen-playground-screenshots');

/** Each page built once per test file, into a directory of its own, removed when the file ends. */
const built = new Map<BuiltPage, Promise<string>>();
export function builtPage(page: BuiltPage): Promise<string> {
  let done = built.get(page);
  if (!done) {
    done = mkdtemp(join(tmpdir(), `${page}-`)).then((dir) => buildPage(page, dir));
    const removed = done;
    tap.teardown(async () => rm(await removed, { recursive: true, force: true }));
    built.set(page, done);
  }
  return done;
}

export const builtPlayground = () => builtPage('playground');

export interface PlaygroundSession extends TestApp {
  origin: string;
  events: TaskEvents;
  page: Page;
  /** Console errors (CSP violations among them) and uncaught page errors. */
  consoleErrors: string[];
  /** Requests the page tried to make to any other origin (all refused). */
  foreignRequests: string[];
  /** The headers of the page's own answer. */
  pageHeaders: Record<string, string>;
  screenshot(name: string): Promise<string>;
  /** Types the key into the page and waits for the form. */
  enterKey(key: string): Promise<void>;
}

/**
 * `serve`'s HTTP side on a loopback port (PUBLIC_BASE_URL is exactly there, so signed URLs point
 * back at it), the Playground open in a headless Chromium that may reach only that origin.
 */
export async function openPlayground(
  t: Test,
  options: {
    viewport?: { width: number; height: number };
    env?: Record<string, string>;
    testApp?: TestAppOptions;
    /** Origins the page may reach besides the API's (an S3 bucket that presigned downloads redirect to). */
    alsoAllowed?: string[];
  } = {},
): Promise<PlaygroundSession> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const events = new TaskEvents();
  const harness = await buildTestApp(
    t,
    { PUBLIC_BASE_URL: origin, ...options.env },
    { events, playgroundDir: await builtPlayground(), ...options.testApp },
  );
  await harness.app.listen({ host: '127.0.0.1', port });
  const browser = await launchChromium(t);
  const page = await browser.newPage({ viewport: options.viewport ?? { width: 1280, height: 1000 } });
  const consoleErrors: string[] = [];
  const foreignRequests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(String(error)));
  await page.route('**/*', (route) => {
    const url = route.request().url();
    const allowed = [origin, ...(options.alsoAllowed ?? []), 'blob:'];
    if (allowed.some((prefix) => url.startsWith(prefix))) return route.continue();
    foreignRequests.push(url);
    return route.abort();
  });
  const response = await page.goto(`${origin}/playground`);
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  return {
    ...harness,
    origin,
    events,
    page,
    consoleErrors,
    foreignRequests,
    pageHeaders: (await response?.allHeaders()) ?? {},
    async screenshot(name) {
      const path = join(SCREENSHOT_DIR, `${name}.png`);
      await page.screenshot({ path, fullPage: true });
      if (!existsSync(path)) throw new Error(`no screenshot at ${path}`);
      return path;
    },
    async enterKey(key) {
      await page.getByRole('textbox', { name: /^API key/ }).fill(key);
      await page.getByRole('button', { name: 'Use key' }).click();
      await page.locator('body[data-ready=yes]').waitFor();
    },
  };
}

/**
 * A built page served as both pages are (decisions 0020, 0037): the page, its script, styles and
 * icon, each with the page's one CSP (it replaces helmet's), no frames, no referrer, nosniff and
 * `Cache-Control: no-cache`; no inline script, style or handler for the CSP to refuse; hidden from
 * the OpenAPI document. Returns the page's answer.
 */
export async function assertPageServed(t: Test, app: FastifyInstance, page: BuiltPage) {
  const answer = await app.inject({ url: `/${page}` });
  t.equal(answer.statusCode, 200);
  t.match(answer.headers['content-type'], /^text\/html/);
  t.match(answer.body, `<script type="module" src="/${page}/${page}.js">`);
  t.match(answer.body, `<link rel="stylesheet" href="/${page}/${page}.css">`);
  t.notMatch(
    answer.body,
    /<script>|<style|\sstyle=|\son[a-z]+=/,
    'no inline script, style or handler for the CSP to refuse',
  );
  const policy = answer.headers['content-security-policy'];
  t.type(policy, 'string', "one policy: the page's replaces helmet's");
  t.match(policy, /^default-src 'self'; script-src 'self'; style-src 'self'; /);
  t.match(policy, /; frame-ancestors 'none'$/);
  for (const [path, type] of [
    [`/${page}`, /^text\/html/],
    [`/${page}/${page}.js`, /^text\/javascript/],
    [`/${page}/${page}.css`, /^text\/css/],
    [`/${page}/favicon.svg`, /^image\/svg\+xml/],
  ] as const) {
    const file = await app.inject({ url: path });
    t.equal(file.statusCode, 200, path);
    t.match(file.headers['content-type'], type, path);
    t.equal(file.headers['content-security-policy'], policy, `${path}: the page's CSP`);
    t.equal(file.headers['x-frame-options'], 'DENY', `${path}: never in a frame`);
    t.equal(file.headers['x-content-type-options'], 'nosniff', path);
    t.equal(file.headers['referrer-policy'], 'no-referrer', `${path}: signed URLs and keys never leave in a Referer`);
    t.equal(file.headers['cache-control'], 'no-cache', `${path}: cached, revalidated before each use`);
  }
  const document = (await app.inject({ url: '/openapi.json' })).json();
  t.same(
    Object.keys(document.paths).filter((path) => path.startsWith(`/${page}`)),
    [],
    'not in the OpenAPI document',
  );
  return answer;
}
