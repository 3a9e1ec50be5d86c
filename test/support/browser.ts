import { chromium, type Browser, type Locator, type Page, type Response } from 'playwright-core';

/**
 * A real headless Chromium (Debian's /usr/bin/chromium, installed by `ensure-deps.sh test`) for
 * the dashboards' tests: one browser per test file, a context per test. Without the
 * background-networking flags Chromium stalls on this closed network, reaching for Google's
 * services at start.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/**
 * Clicks a form's submit button and waits until the document it leads to has loaded: the answer
 * to the post, or the page a redirect led to.
 */
export async function submit(page: Page, button: Locator): Promise<Response> {
  const [response] = await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), button.click()]);
  if (!response) throw new Error('the form led to no document');
  return response;
}

export const pathOf = (page: Page): string => new URL(page.url()).pathname;
