import { chromium, type Browser } from 'playwright-core';
import type { Test } from 'tap';

/** Debian's chromium (`apt-get install -y chromium`; .ci/run installs it when it is missing). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

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
