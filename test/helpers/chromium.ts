import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import type { Test } from 'tap';

/** Debian's chromium (`apt-get install -y chromium`; .ci/run installs it when it is missing). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Screenshots are kept after the run (SCREENSHOT_DIR, else a fixed directory under the temp dir). */
export const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? join(tmpdir(), 'imagegen-playground-screenshots');

/**
 * The line `npm test` ends with when the browser tests were skipped for want of Chromium (tap
 * prints only a skip line per test, easy to miss); null when Chromium is there.
 */
export function browserTestsSkippedNotice(): string | null {
  if (existsSync(CHROMIUM)) return null;
  return `# Browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH); the Playground, console, Swagger UI and EventSource tests did not run.\n`;
}

/** A headless Chromium, closed when the test ends. */
export async function launchChromium(t: Test): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  t.teardown(() => browser.close());
  // Test files run through tsx, whose esbuild keeps function names by wrapping them in a `__name`
  // helper; a function handed to page.evaluate carries that call into the page, which must have it.
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const context = await newContext(options);
    await context.addInitScript(KEEP_NAMES_HELPER);
    return context;
  };
  const newPage = browser.newPage.bind(browser);
  browser.newPage = async (options) => {
    const page = await newPage(options);
    await page.addInitScript(KEEP_NAMES_HELPER);
    return page;
  };
  return browser;
}

/** esbuild's own `__name` helper, as its output defines it. */
const KEEP_NAMES_HELPER =
  'globalThis.__name = (target, value) => Object.defineProperty(target, "name", { value, configurable: true });';
