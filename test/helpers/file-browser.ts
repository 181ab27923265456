import type { Browser } from 'playwright-core';
import tap from 'tap';
import { launchChromium } from './chromium.js';

// A module of its own, not a part of chromium.ts: importing tap starts a root test, and
// scripts/tap-passes.ts, which is not a test file, reads the browser notice from chromium.ts.

let fileBrowser: Promise<Browser> | undefined;

/**
 * One headless Chromium for the whole test file, launched by the first test that asks and closed
 * when the file ends: a launch costs about 1.6 s. Each test opens a context (its own storage) or a
 * page of its own in it.
 */
export function browserOfFile(): Promise<Browser> {
  fileBrowser ??= launchChromium(tap);
  return fileBrowser;
}
