import { createHash } from 'node:crypto';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, createDeveloperAccount } from '../shared/accounts/accounts.js';
import { hashPassword } from '../shared/accounts/passwords.js';
import { launchBrowser } from './support/browser.js';
import { bearer, call, startTestPlatform, type TestPlatform } from './support/test-platform.js';

/**
 * The developer dashboard (/app) driven by a real headless Chromium against the real app and
 * database: sign-in, the one-time plaintext, revocation, the Origin check and sign-out.
 */
// A second origin the dashboard must accept on writes, as behind a proxy.
const PUBLIC_BASE_URL = 'https://dashboard.example.test';
const PASSWORD = 'a long dashboard password';
const SIGN_IN_REFUSED = 'The email or password is not right.';

let gateway: TestPlatform;
let browser: Browser;
const openContexts: BrowserContext[] = [];

beforeAll(async () => {
  gateway = await startTestPlatform({ PUBLIC_BASE_URL });
  browser = await launchBrowser();
});
afterEach(async () => {
  await Promise.all(openContexts.splice(0).map((context) => context.close()));
});
afterAll(async () => {
  await browser?.close();
  await gateway?.close();
});

interface Developer {
  accountId: string;
  email: string;
}

let developerCount = 0;

async function createDeveloper(): Promise<Developer> {
  const email = `dashboard${++developerCount}-${gateway.tag}@example.test`;
  const account = await createDeveloperAccount(gateway.platform.db, { email, password: PASSWORD, initialCreditMicros: 1_000_000 });
  return { accountId: account.id, email };
}

async function openPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ baseURL: gateway.baseUrl });
  openContexts.push(context);
  return { context, page: await context.newPage() };
}

/** Clicks a form's submit button and waits until the document it leads to has loaded. */
async function submit(page: Page, button: Locator): Promise<void> {
  await Promise.all([page.waitForEvent('framenavigated', (frame) => frame === page.mainFrame()), button.click()]);
  await page.waitForLoadState('load');
}

async function fillSignIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto('/app/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await submit(page, page.getByRole('button', { name: 'Sign in' }));
}

async function signedInPage(developer: Developer): Promise<{ context: BrowserContext; page: Page }> {
  const opened = await openPage();
  await fillSignIn(opened.page, developer.email, PASSWORD);
  expect(pathOf(opened.page)).toBe('/app/api-keys');
  return opened;
}

const pathOf = (page: Page) => new URL(page.url()).pathname;

async function sessionCookie(context: BrowserContext) {
  return (await context.cookies()).find((cookie) => cookie.name === 'svc_session');
}

async function sessionCount(accountId: string): Promise<number> {
  const { rows } = await gateway.platform.db.query<{ count: string }>('SELECT count(*) FROM dashboard_sessions WHERE account_id = $1', [accountId]);
  return Number(rows[0]!.count);
}

async function keyNames(accountId: string): Promise<string[]> {
  const { rows } = await gateway.platform.db.query<{ name: string }>('SELECT name FROM api_keys WHERE account_id = $1 ORDER BY created_at', [accountId]);
  return rows.map((row) => row.name);
}

/** A form post from outside the browser, with the browser's session cookie and a chosen Origin. */
function postForm(path: string, fields: Record<string, string>, headers: { cookie?: string; origin?: string }) {
  return call(gateway.baseUrl, path, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(headers.cookie !== undefined && { cookie: `svc_session=${headers.cookie}` }),
      ...(headers.origin !== undefined && { origin: headers.origin }),
    },
    body: new URLSearchParams(fields).toString(),
  });
}

describe('signing in', () => {
  it('sends a visitor without a session to the sign-in page', async () => {
    const direct = await call(gateway.baseUrl, '/app/api-keys', { redirect: 'manual' });
    expect(direct.status).toBe(303);
    expect(direct.headers.get('location')).toBe('/app/login');

    const { page } = await openPage();
    const response = await page.goto('/app/api-keys');
    expect(pathOf(page)).toBe('/app/login');
    expect(response?.headers()['cache-control']).toBe('no-store');
    expect(await page.getByRole('heading', { name: 'Sign in' }).count()).toBe(1);
  });

  it('gives the same generic message for a wrong password and for an unknown email', async () => {
    const developer = await createDeveloper();
    const { context, page } = await openPage();

    await fillSignIn(page, developer.email, 'not the password');
    expect(pathOf(page)).toBe('/app/login');
    expect(await page.getByRole('alert').innerText()).toBe(SIGN_IN_REFUSED);

    await fillSignIn(page, `nobody-${gateway.tag}@example.test`, PASSWORD);
    expect(pathOf(page)).toBe('/app/login');
    expect(await page.getByRole('alert').innerText()).toBe(SIGN_IN_REFUSED);

    expect(await sessionCookie(context)).toBeUndefined();
    expect(await sessionCount(developer.accountId)).toBe(0);

    const wrongPassword = await postForm('/app/login', { email: developer.email, password: 'not the password' }, { origin: gateway.baseUrl });
    const unknownEmail = await postForm('/app/login', { email: `nobody-${gateway.tag}@example.test`, password: PASSWORD }, { origin: gateway.baseUrl });
    expect([wrongPassword.status, unknownEmail.status]).toEqual([401, 401]);
    expect(wrongPassword.text.replace(developer.email, 'EMAIL')).toBe(unknownEmail.text.replace(`nobody-${gateway.tag}@example.test`, 'EMAIL'));
  });

  it('refuses a provisioned end-user account even with its right password', async () => {
    const developer = await createDeveloper();
    const email = `end-user-${gateway.tag}@example.test`;
    const { rows } = await gateway.platform.db.query<{ id: string }>(
      `INSERT INTO accounts (owner_type, parent_account_id, email, username, password_hash)
       VALUES ('api_end_user', $1, $2, $3, $4) RETURNING id`,
      [developer.accountId, email, `eu_${gateway.tag}`, await hashPassword(PASSWORD)],
    );
    const { context, page } = await openPage();
    await fillSignIn(page, email, PASSWORD);
    expect(pathOf(page)).toBe('/app/login');
    expect(await page.getByRole('alert').innerText()).toBe(SIGN_IN_REFUSED);
    expect(await sessionCookie(context)).toBeUndefined();
    expect(await sessionCount(rows[0]!.id)).toBe(0);
  });

  it('refuses a closed developer account', async () => {
    const developer = await createDeveloper();
    await gateway.platform.db.query(`UPDATE accounts SET status = 'closed', closed_at = now() WHERE id = $1`, [developer.accountId]);
    const { page } = await openPage();
    await fillSignIn(page, developer.email, PASSWORD);
    expect(await page.getByRole('alert').innerText()).toBe(SIGN_IN_REFUSED);
    expect(await sessionCount(developer.accountId)).toBe(0);
  });

  it('sets an HttpOnly, Secure, SameSite=Lax cookie for /app and stores only its SHA-256', async () => {
    const developer = await createDeveloper();
    const { context } = await signedInPage(developer);
    const cookie = await sessionCookie(context);
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Lax', path: '/app' });
    const { rows } = await gateway.platform.db.query<{ token_hash: Buffer; lifetime_hours: number }>(
      `SELECT token_hash, extract(epoch FROM expires_at - created_at) / 3600 AS lifetime_hours FROM dashboard_sessions WHERE account_id = $1`,
      [developer.accountId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash.equals(createHash('sha256').update(cookie!.value).digest())).toBe(true);
    expect(Number(rows[0]!.lifetime_hours)).toBe(12);
  });

  it('treats an expired session as signed out', async () => {
    const developer = await createDeveloper();
    const { page } = await signedInPage(developer);
    await gateway.platform.db.query(`UPDATE dashboard_sessions SET created_at = now() - interval '13 hours', expires_at = now() - interval '1 hour' WHERE account_id = $1`, [
      developer.accountId,
    ]);
    await page.goto('/app/api-keys');
    expect(pathOf(page)).toBe('/app/login');
  });
});

describe('API keys in the dashboard', () => {
  it('lists the keys, creates one whose plaintext is shown once and works, then revokes it', async () => {
    const developer = await createDeveloper();
    const existing = await createApiKey(gateway.platform.db, developer.accountId, { name: 'laptop', scopes: ['api:chat', 'api:write'] });
    const { page } = await signedInPage(developer);

    const existingRow = page.getByRole('row').filter({ hasText: 'laptop' });
    expect(await existingRow.innerText()).toContain(existing.key.display_prefix);
    expect(await existingRow.innerText()).toContain('api:chat, api:write');

    await page.getByLabel('Name').fill('ci runner');
    await page.getByLabel('api:read').check();
    await page.getByLabel('api:chat').check();
    await submit(page, page.getByRole('button', { name: 'Create key' }));
    const plaintext = await page.locator('#new-api-key').innerText();
    expect(plaintext).toMatch(/^ko_[0-9a-f]{64}$/);
    expect(await keyNames(developer.accountId)).toEqual(['laptop', 'ci runner']);

    const balance = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(plaintext) });
    expect(balance.status).toBe(200);
    expect(balance.body).toMatchObject({ account_id: developer.accountId, billing: 'wallet' });

    await page.goto('/app/api-keys');
    const html = await page.content();
    expect(html).not.toContain(plaintext);
    expect(html).not.toContain(plaintext.slice(11));
    const newRow = page.getByRole('row').filter({ hasText: 'ci runner' });
    expect(await newRow.innerText()).toContain(plaintext.slice(0, 11));
    expect(await newRow.innerText()).toContain('api:chat, api:read');

    await submit(page, newRow.getByRole('button', { name: `Revoke ${plaintext.slice(0, 11)}` }));
    expect(pathOf(page)).toBe('/app/api-keys');
    expect(await page.getByRole('row').filter({ hasText: 'ci runner' }).count()).toBe(0);
    const afterRevoke = await call(gateway.baseUrl, '/v1/balance', { headers: bearer(plaintext) });
    expect({ status: afterRevoke.status, code: afterRevoke.body?.error?.code }).toEqual({ status: 401, code: 'invalid_token' });
    expect(await keyNames(developer.accountId)).toEqual(['laptop']);
  });

  it('keeps the form and says what to fix when no scope is chosen or the expiry is past', async () => {
    const developer = await createDeveloper();
    const { page } = await signedInPage(developer);

    await page.getByLabel('Name').fill('no scopes');
    await submit(page, page.getByRole('button', { name: 'Create key' }));
    expect(await page.getByRole('alert').innerText()).toBe('Choose at least one scope.');
    expect(await page.getByLabel('Name').inputValue()).toBe('no scopes');

    await page.getByLabel('api:read').check();
    await page.getByLabel('Expires at, UTC (optional)').fill('2001-01-01T00:00');
    await submit(page, page.getByRole('button', { name: 'Create key' }));
    expect(await page.getByRole('alert').innerText()).toBe('The expiry must be in the future.');
    expect(await page.getByLabel('api:read').isChecked()).toBe(true);
    expect(await page.locator('#new-api-key').count()).toBe(0);
    expect(await keyNames(developer.accountId)).toEqual([]);

    await page.getByLabel('Expires at, UTC (optional)').fill('2099-06-30T12:30');
    await submit(page, page.getByRole('button', { name: 'Create key' }));
    expect(await page.locator('#new-api-key').innerText()).toMatch(/^ko_[0-9a-f]{64}$/);
    const { rows } = await gateway.platform.db.query<{ expires_at: Date }>('SELECT expires_at FROM api_keys WHERE account_id = $1', [developer.accountId]);
    expect(rows.map((row) => row.expires_at.toISOString())).toEqual(['2099-06-30T12:30:00.000Z']);
  });

  it('escapes what it shows: a key name is text, never markup', async () => {
    const developer = await createDeveloper();
    const name = '<img src=x onerror="document.title=1">&amp;';
    await createApiKey(gateway.platform.db, developer.accountId, { name, scopes: ['api:read'] });
    const { page } = await signedInPage(developer);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.getByRole('row').filter({ hasText: name }).count()).toBe(1);
    expect(await page.content()).toContain('&lt;img src=x onerror="document.title=1"&gt;&amp;amp;');
  });

  it("cannot revoke another developer's key: 404, and the key keeps working", async () => {
    const developer = await createDeveloper();
    const other = await createDeveloper();
    const theirs = await createApiKey(gateway.platform.db, other.accountId, { name: 'theirs', scopes: ['api:read'] });
    const { context } = await signedInPage(developer);
    const cookie = (await sessionCookie(context))!.value;

    const response = await postForm(`/app/api-keys/${theirs.key.id}/revoke`, {}, { cookie, origin: gateway.baseUrl });
    expect({ status: response.status, code: response.body?.error?.code }).toEqual({ status: 404, code: 'not_found' });
    expect((await call(gateway.baseUrl, '/v1/balance', { headers: bearer(theirs.plaintext) })).status).toBe(200);
  });
});

describe('the Origin check on dashboard writes', () => {
  it('refuses a post with a foreign or missing Origin, even with a valid session, and creates nothing', async () => {
    const developer = await createDeveloper();
    const { context } = await signedInPage(developer);
    const cookie = (await sessionCookie(context))!.value;
    const fields = { name: 'forged', scopes: 'admin' };

    for (const origin of ['https://evil.example', undefined, 'null', gateway.baseUrl.replace('127.0.0.1', 'localhost')]) {
      const response = await postForm('/app/api-keys', fields, { cookie, ...(origin !== undefined && { origin }) });
      expect({ origin, status: response.status, type: response.body?.error?.type, code: response.body?.error?.code }).toEqual({
        origin,
        status: 403,
        type: 'permission_error',
        code: 'dashboard_origin_mismatch',
      });
    }
    expect(await keyNames(developer.accountId)).toEqual([]);

    const forgedSignIn = await postForm('/app/login', { email: developer.email, password: PASSWORD }, { origin: 'https://evil.example' });
    expect({ status: forgedSignIn.status, code: forgedSignIn.body?.error?.code }).toEqual({ status: 403, code: 'dashboard_origin_mismatch' });
    const forgedSignOut = await postForm('/app/logout', {}, { cookie, origin: 'https://evil.example' });
    expect(forgedSignOut.status).toBe(403);
    expect(await sessionCount(developer.accountId)).toBe(1);
  });

  it("accepts the dashboard's own origin and PUBLIC_BASE_URL's", async () => {
    const developer = await createDeveloper();
    const { context } = await signedInPage(developer);
    const cookie = (await sessionCookie(context))!.value;

    const own = await postForm('/app/api-keys', { name: 'own origin', scopes: 'api:read' }, { cookie, origin: gateway.baseUrl });
    const proxied = await postForm('/app/api-keys', { name: 'public origin', scopes: 'api:read' }, { cookie, origin: PUBLIC_BASE_URL });
    expect([own.status, proxied.status]).toEqual([200, 200]);
    expect(own.text).toMatch(/id="new-api-key">ko_[0-9a-f]{64}</);
    expect(await keyNames(developer.accountId)).toEqual(['own origin', 'public origin']);
  });
});

describe('signing out', () => {
  it('deletes the session row and the cookie; the keys page then sends to sign-in again', async () => {
    const developer = await createDeveloper();
    const { context, page } = await signedInPage(developer);
    const cookie = (await sessionCookie(context))!.value;
    expect(await sessionCount(developer.accountId)).toBe(1);

    await submit(page, page.getByRole('button', { name: 'Sign out' }));
    expect(pathOf(page)).toBe('/app/login');
    expect(await sessionCount(developer.accountId)).toBe(0);
    expect(await sessionCookie(context)).toBeUndefined();

    await page.goto('/app/api-keys');
    expect(pathOf(page)).toBe('/app/login');
    // The old token is dead server-side too, not just forgotten by this browser.
    const replayed = await call(gateway.baseUrl, '/app/api-keys', { redirect: 'manual', headers: { cookie: `svc_session=${cookie}` } });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get('location')).toBe('/app/login');
  });
});
