import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

/** Debian's Chromium (`.ci/run` installs it); Playwright's own browser download is not used. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

// Headless, without the sandbox (the tests may run as root) and without any request of Chromium's own.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-quic',
  '--disable-sync',
];

export interface TestBrowser {
  /**
   * A page in a context of its own (cookies of its own), sending `headers` with each of its requests; closed with
   * the browser if the test leaves it open.
   */
  newPage(headers?: Record<string, string>): Promise<Page>;
  close(): Promise<void>;
}

/**
 * A real Chromium, launched by playwright-core (which gives it a fresh user-data-dir in the temp directory and
 * removes it on close).
 */
export async function launchBrowser(): Promise<TestBrowser> {
  const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  const contexts: BrowserContext[] = [];
  return {
    async newPage(headers = {}) {
      const context = await browser.newContext({ extraHTTPHeaders: headers, viewport: { width: 1280, height: 900 } });
      contexts.push(context);
      return context.newPage();
    },
    async close() {
      for (const context of contexts) await context.close().catch(() => undefined);
      await browser.close();
    },
  };
}
