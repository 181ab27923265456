import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import tap, { type Test } from 'tap';
import { buildPage } from '../../scripts/build-pages.js';
import type { BuiltPage } from '../../src/http/routes/pages.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp, fileTestApp, type TestApp, type TestAppOptions } from './app.js';
import { SCREENSHOT_DIR } from './chromium.js';
import { browserOfFile } from './file-browser.js';
import { freePort } from './processes.js';

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

/** A browser tab on a page of the app, watched for what must never happen there. */
export interface WatchedPage {
  page: Page;
  /** Console errors (CSP violations among them) and uncaught page errors. */
  consoleErrors: string[];
  /** Requests the page tried to make to any other origin (all refused). */
  foreignRequests: string[];
  /** The headers of the page's own answer. */
  pageHeaders: Record<string, string>;
  screenshot(name: string): Promise<string>;
}

/**
 * A new tab (its own storage) of `browser` opened on `origin` + `path`, which may reach only that
 * origin (and `alsoAllowed`); each CSP violation is written to the console as an error as well.
 */
export async function openWatchedPage(
  browser: Browser,
  origin: string,
  path: string,
  options: { viewport?: { width: number; height: number }; alsoAllowed?: string[] } = {},
): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  const foreignRequests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(String(error)));
  await page.addInitScript(() =>
    document.addEventListener('securitypolicyviolation', (event) =>
      console.error(
        `CSP violation: ${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`,
      ),
    ),
  );
  await page.route('**/*', (route) => {
    const url = route.request().url();
    const allowed = [origin, ...(options.alsoAllowed ?? []), 'blob:'];
    if (allowed.some((prefix) => url.startsWith(prefix))) return route.continue();
    foreignRequests.push(url);
    return route.abort();
  });
  const response = await page.goto(`${origin}${path}`);
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  return {
    page,
    consoleErrors,
    foreignRequests,
    pageHeaders: (await response?.allHeaders()) ?? {},
    async screenshot(name) {
      const file = join(SCREENSHOT_DIR, `${name}.png`);
      await page.screenshot({ path: file, fullPage: true });
      if (!existsSync(file)) throw new Error(`no screenshot at ${file}`);
      return file;
    },
  };
}

/**
 * What every browser test ends with: nothing went wrong in the page and nothing left this origin.
 * Chromium logs each answer ≥ 400 to the console; those the test asked for are named in `refusals`.
 */
export function assertCleanPage(t: Test, session: WatchedPage, refusals: number[] = []): void {
  const unexpected = session.consoleErrors.filter(
    (message) => !refusals.some((status) => message.includes(`the server responded with a status of ${status}`)),
  );
  t.same(unexpected, [], 'no console errors, no CSP violations');
  t.same(session.foreignRequests, [], 'no request to another origin');
}

export interface PlaygroundSession extends TestApp, WatchedPage {
  origin: string;
  events: TaskEvents;
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
  const watched = await openWatchedPage(await browserOfFile(), origin, '/playground', options);
  t.teardown(() => watched.page.context().close());
  const { page } = watched;
  return {
    ...harness,
    ...watched,
    origin,
    events,
    async enterKey(key) {
      await page.getByRole('textbox', { name: /^API key/ }).fill(key);
      await page.getByRole('button', { name: 'Use key' }).click();
      await page.locator('body[data-ready=yes]').waitFor();
    },
  };
}

/**
 * The app of a whole file listening on a loopback port that is its PUBLIC_BASE_URL, serving the
 * built pages, with one headless Chromium for the file (launched by the first tab asked for).
 * Each test opens tabs of its own (`open`), so their storage is their own. Call at the top level.
 */
export async function pagesFileTestApp(env: Record<string, string> = {}) {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const events = new TaskEvents();
  const fileApp = fileTestApp(
    { PUBLIC_BASE_URL: origin, ...env },
    { events, playgroundDir: await builtPage('playground'), consoleDir: await builtPage('console') },
  );
  tap.before(async () => {
    await fileApp().app.listen({ host: '127.0.0.1', port });
  });
  return {
    fileApp,
    origin,
    events,
    async open(path: string, options: { viewport?: { width: number; height: number } } = {}) {
      return openWatchedPage(await browserOfFile(), origin, path, options);
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

/**
 * A chart's canvas read back: how many pixels are painted at all, and how many are exactly `rgb`
 * (a series' colour), which only its bars are: drawn data, not just axes and labels.
 */
export function canvasPixels(
  page: Page,
  selector: string,
  rgb: readonly [number, number, number],
): Promise<{ painted: number; ofColour: number }> {
  return page.locator(selector).evaluate((canvas: HTMLCanvasElement, [r, g, b]) => {
    const pixels = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
    let painted = 0;
    let ofColour = 0;
    for (let i = 0; i < pixels.length; i += 4) {
      if (pixels[i + 3] > 0) painted++;
      if (pixels[i] === r && pixels[i + 1] === g && pixels[i + 2] === b && pixels[i + 3] === 255) ofColour++;
    }
    return { painted, ofColour };
  }, rgb);
}

/** The cells of a table's body (or `tfoot`) rows, header cells included, as text. */
export function tableCells(page: Page, selector: string): Promise<string[][]> {
  return page
    .locator(selector)
    .evaluateAll((rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent?.trim() ?? '')));
}

/** The inputs, selects, text areas and buttons of the page with neither a label nor a name. */
export function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll<HTMLInputElement>('input, select, textarea, button')]
      .filter((control) => {
        if (control instanceof HTMLButtonElement) return !(control.textContent?.trim() || control.ariaLabel);
        return (control.labels?.length ?? 0) === 0;
      })
      .map((control) => control.id || control.outerHTML),
  );
}

/** WCAG AA contrast of every piece of visible text against the background it is drawn on: what fails, and how many were checked. */
export function contrastFailures(page: Page): Promise<{ failures: string[]; checked: number }> {
  return page.evaluate(() => {
    const rgb = (color: string) => (color.match(/[\d.]+/g) ?? []).map(Number);
    const luminance = ([r, g, b]: number[]) => {
      const [R, G, B] = [r, g, b].map((v) => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * R + 0.7152 * G + 0.0722 * B;
    };
    const background = (node: Element | null): number[] => {
      for (let at = node; at; at = at.parentElement) {
        const [r, g, b, a = 1] = rgb(getComputedStyle(at).backgroundColor);
        if (a > 0) return [r, g, b];
      }
      return [255, 255, 255];
    };
    const failures: string[] = [];
    let checked = 0;
    for (const node of document.querySelectorAll('body *')) {
      const element = node as HTMLElement;
      const ownText = [...element.childNodes].some((c) => c.nodeType === Node.TEXT_NODE && c.textContent?.trim());
      if (!ownText || element.offsetParent === null) continue;
      checked++;
      const style = getComputedStyle(element);
      const [fg, bg] = [luminance(rgb(style.color)), luminance(background(element))];
      const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
      const large =
        Number.parseFloat(style.fontSize) >= 24 ||
        (Number.parseFloat(style.fontSize) >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) failures.push(`${element.tagName}#${element.id}: ${ratio.toFixed(2)}`);
    }
    return { failures, checked };
  });
}
