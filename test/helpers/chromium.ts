import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import type { Test } from 'tap';

/** Debian's chromium (`apt-get install -y chromium`; .ci/run installs it when it is missing). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * The line `npm test` ends with when the browser tests were skipped for want of Chromium (tap
 * prints only a skip line per test, easy to miss); null when Chromium is there.
 */
export function browserTestsSkippedNotice(): string | null {
  if (existsSync(CHROMIUM)) return null;
  return `# Browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH); the Playground, Swagger UI and EventSource tests did not run.\n`;
}

/** A headless Chromium, closed when the test ends. */
export async function launchChromium(t: Test): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  t.teardown(() => browser.close());
  return browser;
}
