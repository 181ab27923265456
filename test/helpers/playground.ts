import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import tap, { type Test } from 'tap';
import { buildPlayground } from '../../scripts/build-playground.js';
import { TaskEvents } from '../../src/services/task-events.js';
import { buildTestApp, type TestApp, type TestAppOptions } from './app.js';
import { launchChromium } from './chromium.js';
import { freePort } from './processes.js';

/** Screenshots are kept after the run (SCREENSHOT_DIR, else a fixed directory under the temp dir). */
export const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? join(tmpdir(), 'imagegen-playground-screenshots');

/** The Playground built once per test file, into a directory of its own, removed when the file ends. */
let built: Promise<string> | undefined;
export function builtPlayground(): Promise<string> {
  if (!built) {
    const done = mkdtemp(join(tmpdir(), 'playground-')).then((dir) => buildPlayground(dir));
    tap.teardown(async () => rm(await done, { recursive: true, force: true }));
    built = done;
  }
  return built;
}

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
