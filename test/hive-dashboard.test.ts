import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SIGN_IN_REFUSED } from '../shared/hive/dashboard/sign-in.js';
import { launchBrowser, pathOf, submit } from './support/browser.js';
import { admitPerson, createNode, machineKey, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';
import { startStripeStandIn, type StripeStandIn } from './support/stripe-mock.js';
import { call } from './support/test-platform.js';

/**
 * The hive's browser dashboard driven by a real headless Chromium against the real hive app and
 * database: sign-in and its lockout, browsing limited to the grant, approving a device code,
 * revoking a credential, the top-up redirect, sign-out, the Origin check and the account sections
 * only admins see. The hive trusts one proxy hop here, so each test signs in from a client address
 * of its own (X-Forwarded-For) and the lockout by place of one test never touches another.
 */
const OWNER_PASSWORD = 'correct horse battery staple';
const SESSION_COOKIE = 'hive_session';

let stripe: StripeStandIn;
let world: HiveWorld;
let browser: Browser;
const openContexts: BrowserContext[] = [];
let places = 0;

beforeAll(async () => {
  stripe = await startStripeStandIn();
  world = await startHiveWorld({ TRUST_PROXY_HOPS: '1', ...stripe.env });
  browser = await launchBrowser();
});
afterEach(async () => {
  await Promise.all(openContexts.splice(0).map((context) => context.close()));
});
afterAll(async () => {
  await browser?.close();
  await world?.close();
  await stripe?.close();
});

/** A client address no other test signs in from. */
const newPlace = () => `198.51.100.${++places}`;

async function openPage(place = newPlace()): Promise<{ context: BrowserContext; page: Page; place: string }> {
  const context = await browser.newContext({ baseURL: world.baseUrl, extraHTTPHeaders: { 'x-forwarded-for': place } });
  openContexts.push(context);
  return { context, page: await context.newPage(), place };
}

async function fillSignIn(page: Page, email: string, password: string) {
  await page.goto('/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  return submit(page, page.getByRole('button', { name: 'Sign in' }));
}

async function signedInPage(email: string, password = OWNER_PASSWORD) {
  const opened = await openPage();
  await fillSignIn(opened.page, email, password);
  expect(pathOf(opened.page)).toBe('/dashboard');
  return opened;
}

async function sessionCookie(context: BrowserContext) {
  return (await context.cookies()).find((cookie) => cookie.name === SESSION_COOKIE);
}

/** A request from outside the browser, carrying a session cookie and a chosen Origin. */
function send(path: string, options: { method?: 'GET' | 'POST'; cookie?: string; origin?: string; form?: Record<string, string>; place?: string } = {}) {
  return call(world.baseUrl, path, {
    method: options.method ?? (options.form ? 'POST' : 'GET'),
    redirect: 'manual',
    headers: {
      'x-forwarded-for': options.place ?? newPlace(),
      ...(options.form && { 'content-type': 'application/x-www-form-urlencoded' }),
      ...(options.cookie !== undefined && { cookie: `${SESSION_COOKIE}=${options.cookie}` }),
      ...(options.origin !== undefined && { origin: options.origin }),
    },
    ...(options.form && { body: new URLSearchParams(options.form).toString() }),
  });
}

const ownOrigin = () => new URL(world.baseUrl).origin;

/** The text of the page's alert (a refused form's message). */
const alertText = (page: Page) => page.getByRole('alert').textContent();

/** A person with `role` on `node`, admitted by the device flow, who has set a dashboard password. */
async function personWithPassword(owner: HiveOwner, grant: { email: string; node: string; role: string }, password: string) {
  const token = await admitPerson(world, owner.token, grant);
  const set = await world.post('/v1/password', token, { password });
  expect(set.status).toBe(200);
  return token;
}

describe('signing in', () => {
  it('signs the owner in with the signup address and password, in an HttpOnly, SameSite cookie that names a server-side session', async () => {
    const owner = await signUp(world, 'signin-org');
    const direct = await send('/dashboard');
    expect(direct.status).toBe(303);
    expect(direct.headers.get('location')).toBe('/login');

    const { context, page } = await openPage();
    const answer = await fillSignIn(page, owner.email, OWNER_PASSWORD);
    expect(answer.status()).toBe(200);
    expect(pathOf(page)).toBe('/dashboard');
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('signin-org');
    expect(await page.getByText(`Signed in as ${owner.email}`).isVisible()).toBe(true);

    const cookie = await sessionCookie(context);
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/dashboard', secure: false });
    const { rows } = await world.hive.db.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM hive.dashboard_sessions s JOIN hive.people p ON p.id = s.person_id WHERE p.email = $1',
      [owner.email],
    );
    expect(rows[0]!.count).toBe(1);
    // Every page says no script may run, no other site may frame it.
    expect(answer.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
  });

  it('locks an address for fifteen minutes after ten wrong passwords, even against the right one, and answers an unknown address exactly as a wrong password', async () => {
    const owner = await signUp(world, 'lockout-org');
    const { page } = await openPage();
    const answers: Array<{ status: number; alert: string | null }> = [];
    for (let attempt = 0; attempt < 10; attempt++) {
      const answer = await fillSignIn(page, owner.email, `wrong password ${attempt}`);
      answers.push({ status: answer.status(), alert: await alertText(page) });
    }
    expect(answers).toEqual(Array.from({ length: 10 }, () => ({ status: 401, alert: SIGN_IN_REFUSED })));

    // The eleventh, with the right password, from the same browser and from another place: refused while locked.
    const locked = await fillSignIn(page, owner.email, OWNER_PASSWORD);
    expect(locked.status()).toBe(429);
    expect(pathOf(page)).toBe('/login');
    await expect(alertText(page)).resolves.toMatch(/locked after ten wrong passwords, for fifteen minutes/);
    const elsewhere = await openPage();
    expect((await fillSignIn(elsewhere.page, owner.email, OWNER_PASSWORD)).status()).toBe(429);
    expect(await sessionCookie(elsewhere.context)).toBeUndefined();

    // An unknown address gets the wrong password's answer, and locks after ten just the same.
    const unknown = `nobody-${Date.now()}@example.test`;
    const stranger = await openPage();
    const first = await fillSignIn(stranger.page, unknown, 'any password at all');
    expect({ status: first.status(), alert: await alertText(stranger.page) }).toEqual({ status: 401, alert: SIGN_IN_REFUSED });
    for (let attempt = 1; attempt < 10; attempt++) {
      expect((await send('/login', { form: { email: unknown, password: 'still wrong' }, origin: ownOrigin() })).status).toBe(401);
    }
    const unknownLocked = await send('/login', { form: { email: unknown, password: 'still wrong' }, origin: ownOrigin() });
    expect(unknownLocked.status).toBe(429);
    expect(unknownLocked.text).toMatch(/locked after ten wrong passwords/);
  }, 120_000);

  it('locks sign-in from one place after ten wrong passwords there, whichever addresses they named', async () => {
    const owner = await signUp(world, 'place-org');
    const place = newPlace();
    for (let attempt = 0; attempt < 10; attempt++) {
      const refused = await send('/login', { form: { email: `guess${attempt}-${Date.now()}@example.test`, password: 'a guess' }, origin: ownOrigin(), place });
      expect(refused.status).toBe(401);
    }
    const fromThere = await send('/login', { form: { email: owner.email, password: OWNER_PASSWORD }, origin: ownOrigin(), place });
    expect(fromThere.status).toBe(429);
    const fromElsewhere = await send('/login', { form: { email: owner.email, password: OWNER_PASSWORD }, origin: ownOrigin() });
    expect(fromElsewhere.status).toBe(303);
    expect(fromElsewhere.headers.get('location')).toBe('/dashboard');
  }, 120_000);

  it('opens the dashboard from a one-time link minted with a person token, once', async () => {
    const owner = await signUp(world, 'open-org');
    const minted = await world.post('/v1/dashboard/session', owner.token);
    expect(minted.status).toBe(201);
    expect(minted.body.url).toMatch(new RegExp(`^${world.baseUrl}/dashboard/open\\?code=[A-Za-z0-9_-]{43}$`));

    const { context, page } = await openPage();
    await page.goto(minted.body.url);
    expect(pathOf(page)).toBe('/dashboard');
    expect(await page.getByText(`Signed in as ${owner.email}`).isVisible()).toBe(true);
    expect(await sessionCookie(context)).toBeDefined();

    const again = await openPage();
    const reused = await again.page.goto(minted.body.url);
    expect(reused?.status()).toBe(401);
    await expect(alertText(again.page)).resolves.toMatch(/expired or was already used/);
    expect(await sessionCookie(again.context)).toBeUndefined();

    // A token with a grant of its own carries no person to sign in.
    const grant = await world.post('/v1/token/create', owner.token, { node: owner.rootPath, role: 'reader' });
    expect((await world.post('/v1/dashboard/session', grant.body.token)).status).toBe(403);
  });
});

describe('what a signed-in person sees', () => {
  let owner: HiveOwner;
  const readerEmail = `reader-${Date.now()}@example.test`;
  const readerPassword = 'a reader password, long enough';
  const memories: Record<string, string> = {};
  let beta: { id: string; path: string };

  beforeAll(async () => {
    owner = await signUp(world, 'browse-org');
    const alpha = await createNode(world, owner.token, owner.rootPath, 'alpha');
    beta = await createNode(world, owner.token, owner.rootPath, 'beta');
    const remember = async (node: string, title: string, body: string) => {
      const response = await world.post('/v1/remember', owner.token, { node, scope: 'notes', title, body });
      expect(response.status).toBe(201);
      memories[title] = response.body.memory.id;
    };
    await remember(alpha.path, 'Alpha deploys on Tuesdays', 'The alpha service ships every Tuesday after the standup.');
    await remember(alpha.path, '<script>alert("title")</script> & <b>bold</b>', '<img src=x onerror=alert("body")>');
    await remember(beta.path, 'Beta launch codename', 'Beta launches as Project Heron.');
    await personWithPassword(owner, { email: readerEmail, node: alpha.path, role: 'reader' }, readerPassword);
  });

  it('browses only the signed-in grant: a sibling project is absent from the pages and its memory is not found', async () => {
    const { page } = await signedInPage(readerEmail, readerPassword);
    page.on('dialog', () => {
      throw new Error('a script ran from a memory');
    });
    await page.goto('/dashboard/browse');
    const listed = await page.locator('main').textContent();
    expect(listed).toContain('Alpha deploys on Tuesdays');
    expect(listed).toContain('<script>alert("title")</script> & <b>bold</b>');
    expect(listed).not.toContain('Beta launch codename');
    expect(listed).not.toContain('browse-org/beta');

    const sibling = await page.goto(`/dashboard/browse?node=${beta.id}`);
    expect(sibling?.status()).toBe(404);
    expect(await page.locator('main').textContent()).not.toContain('Beta launch');

    const outside = await page.goto(`/dashboard/memory?id=${memories['Beta launch codename']}`);
    expect(outside?.status()).toBe(404);
    expect(await page.content()).not.toContain('Heron');

    await page.goto('/dashboard/browse');
    await submit(page, page.getByRole('link', { name: 'Alpha deploys on Tuesdays' }));
    expect(pathOf(page)).toBe('/dashboard/memory');
    await expect(page.locator('#memory-body').textContent()).resolves.toBe('The alpha service ships every Tuesday after the standup.');

    // Markup in a memory is shown as text, never run.
    const marked = await page.goto(`/dashboard/memory?id=${memories['<script>alert("title")</script> & <b>bold</b>']}`);
    expect(marked?.status()).toBe(200);
    await expect(page.locator('#memory-body').textContent()).resolves.toBe('<img src=x onerror=alert("body")>');
    expect(await page.locator('main img, main script, main b').count()).toBe(0);
  });

  it('shows a non-admin seats and their grant, but no billing, people or credentials, and refuses them those writes', async () => {
    const { context, page } = await signedInPage(readerEmail, readerPassword);
    const headings = await page.getByRole('heading', { level: 2 }).allTextContents();
    expect(headings).toEqual(['Your grant', 'Seats']);
    await expect(page.locator('#seat-count').textContent()).resolves.toBe('2');

    const cookie = (await sessionCookie(context))!.value;
    const topUp = await send('/dashboard/topup', { cookie, origin: ownOrigin(), form: { amount: '20' } });
    expect(topUp.status).toBe(403);
    const revoke = await send('/dashboard/revoke', { cookie, origin: ownOrigin(), form: { id: 'tok_000000000000000000000000' } });
    expect(revoke.status).toBe(403);

    const ownerPage = await signedInPage(owner.email);
    expect(await ownerPage.page.getByRole('heading', { level: 2 }).allTextContents()).toEqual(
      expect.arrayContaining(['Your grant', 'Seats', 'Approve a device code', 'Billing', 'People', 'Credentials', 'Machines']),
    );
    expect(await ownerPage.page.locator('main').textContent()).toContain(readerEmail);
  }, 60_000);
});

describe('admin writes', () => {
  it('approves a device code typed by hand (never listed), and the client then polls its token', async () => {
    const owner = await signUp(world, 'approve-org');
    const { page } = await signedInPage(owner.email);
    const started = await world.post('/v1/device/start', undefined);
    await page.reload();
    expect(await page.content()).not.toContain(started.body.user_code);

    const newcomer = `newcomer-${Date.now()}@example.test`;
    await page.getByLabel('Code', { exact: true }).fill(started.body.user_code.toLowerCase().replace('-', ' '));
    await page.getByLabel('Their email').fill(newcomer);
    await page.getByLabel('Node', { exact: true }).selectOption(owner.rootPath);
    await page.getByLabel('Role', { exact: true }).selectOption('member');
    const approved = await submit(page, page.getByRole('button', { name: 'Approve' }));
    expect(approved.status()).toBe(200);
    await expect(page.getByRole('status').textContent()).resolves.toContain(`Approved ${newcomer} as member on approve-org`);

    const polled = await world.post('/v1/device/poll', undefined, { device_code: started.body.device_code });
    expect(polled.body.status).toBe('approved');
    const whoami = await world.post('/v1/whoami', polled.body.token);
    expect(whoami.body.person.email).toBe(newcomer);

    // A code that is not pending is refused on the page, with the form given back.
    await page.getByLabel('Code', { exact: true }).fill('BCDF-GHJK');
    await page.getByLabel('Their email').fill('someone@example.test');
    const refused = await submit(page, page.getByRole('button', { name: 'Approve' }));
    expect(refused.status()).toBe(404);
    await expect(alertText(page)).resolves.toMatch(/No pending device code/);
    await expect(page.getByLabel('Their email').inputValue()).resolves.toBe('someone@example.test');
  });

  it("revokes a credential of the caller's organisation (it is refused at once), and finds none of another's", async () => {
    const owner = await signUp(world, 'revoke-org');
    const other = await signUp(world, 'other-org');
    const doomed = await world.post('/v1/token/create', owner.token, { node: owner.rootPath, role: 'reader', name: 'ci-revoke-me' });
    const foreign = await world.post('/v1/token/create', other.token, { node: other.rootPath, role: 'reader', name: 'not-yours' });
    expect((await world.post('/v1/whoami', doomed.body.token)).status).toBe(200);

    const { context, page } = await signedInPage(owner.email);
    const row = page.getByRole('row').filter({ hasText: 'ci-revoke-me' });
    const answer = await submit(page, row.getByRole('button', { name: /Revoke/ }));
    expect(answer.status()).toBe(200);
    await expect(page.getByRole('status').textContent()).resolves.toContain(`Revoked ${doomed.body.id}`);
    expect(await page.getByRole('row').filter({ hasText: 'ci-revoke-me' }).count()).toBe(0);
    expect((await world.post('/v1/whoami', doomed.body.token)).status).toBe(401);

    const cookie = (await sessionCookie(context))!.value;
    const across = await send('/dashboard/revoke', { cookie, origin: ownOrigin(), form: { id: foreign.body.id } });
    expect(across.status).toBe(404);
    expect((await world.post('/v1/whoami', foreign.body.token)).status).toBe(200);
  });

  it('lists the organisation\'s machines and revokes one, its token with it', async () => {
    const owner = await signUp(world, 'machines-org');
    const enrolled = await world.post('/v1/enrol', undefined, { email: owner.email, password: OWNER_PASSWORD, csr: (await machineKey()).csr, name: 'build-box' });
    expect(enrolled.status).toBe(201);
    expect((await world.post('/v1/whoami', enrolled.body.token)).status).toBe(200);

    const { page } = await signedInPage(owner.email);
    const row = page.getByRole('row').filter({ hasText: 'build-box' });
    expect(await row.getByRole('cell').allTextContents()).toEqual(expect.arrayContaining(['build-box', 'temporary', owner.email, 'active']));
    // A machine's token is the machine's: listed and revoked as the machine, not among the tokens.
    expect(await page.locator('section[aria-labelledby="credentials-title"]').textContent()).not.toContain('machine build-box');

    const answer = await submit(page, row.getByRole('button', { name: 'Revoke machine build-box' }));
    expect(answer.status()).toBe(200);
    expect(await page.getByRole('row').filter({ hasText: 'build-box' }).getByRole('cell').allTextContents()).toContain('revoked');
    expect((await world.post('/v1/whoami', enrolled.body.token)).status).toBe(401);
  });

  it('refuses a write with a foreign or missing Origin (403) and changes nothing', async () => {
    const owner = await signUp(world, 'origin-org');
    const kept = await world.post('/v1/token/create', owner.token, { node: owner.rootPath, role: 'reader', name: 'kept' });
    const { context } = await signedInPage(owner.email);
    const cookie = (await sessionCookie(context))!.value;

    const foreign = await send('/dashboard/revoke', { cookie, origin: 'https://evil.example', form: { id: kept.body.id } });
    expect(foreign.status).toBe(403);
    expect(foreign.text).toMatch(/Origin header is missing or names another site/);
    const missing = await send('/dashboard/revoke', { cookie, form: { id: kept.body.id } });
    expect(missing.status).toBe(403);
    const loginElsewhere = await send('/login', { origin: 'https://evil.example', form: { email: owner.email, password: OWNER_PASSWORD } });
    expect(loginElsewhere.status).toBe(403);
    expect((await world.post('/v1/whoami', kept.body.token)).status).toBe(200);

    // The same write from the hive's own origin goes through.
    const own = await send('/dashboard/revoke', { cookie, origin: ownOrigin(), form: { id: kept.body.id } });
    expect(own.status).toBe(200);
    expect((await world.post('/v1/whoami', kept.body.token)).status).toBe(401);
  });
});

describe('topping up', () => {
  it('sends an admin to the payment provider\'s checkout with a 303 and credits nothing; refuses amounts outside 10 to 500 dollars', async () => {
    const owner = await signUp(world, 'topup-org');
    const { context, page } = await signedInPage(owner.email);
    const balanceBefore = await page.locator('#wallet-balance').textContent();
    expect(balanceBefore).toMatch(/^\d+\.\d{2,6} USD$/);

    // The checkout lies outside this closed network: the browser follows the 303 there, and its request fails to resolve.
    await page.getByLabel(/Top up/).fill('25');
    const toCheckout = page.waitForEvent('requestfailed', (request) => request.url().startsWith('https://checkout.stripe.com/'));
    await page.getByRole('button', { name: 'Pay by card' }).click();
    const checkout = await toCheckout;
    const redirect = await checkout.redirectedFrom()?.response();
    expect(redirect?.url()).toBe(`${world.baseUrl}/dashboard/topup`);
    expect(redirect?.status()).toBe(303);
    expect(redirect?.headers().location).toBe(checkout.url());

    const { rows } = await world.hive.db.query<{ session_id: string; amount_micros: string; credited_at: Date | null }>(
      'SELECT session_id, amount_micros, credited_at FROM hive.wallet_topups WHERE org_id = $1',
      [owner.orgId],
    );
    expect(rows).toEqual([{ session_id: expect.stringMatching(/^cs_/), amount_micros: '25000000', credited_at: null }]);

    // Back from the checkout (a new tab: the first still shows the failed navigation), nothing has been credited.
    const back = await context.newPage();
    await back.goto('/dashboard?topup=cancelled');
    expect(await back.locator('#wallet-balance').textContent()).toBe(balanceBefore);
    expect(await back.getByRole('status').textContent()).toBe('The top-up was cancelled; nothing was charged.');

    const cookie = (await sessionCookie(context))!.value;
    for (const amount of ['9.99', '500.01', 'lots']) {
      const refused = await send('/dashboard/topup', { cookie, origin: ownOrigin(), form: { amount } });
      expect(refused.status).toBe(400);
      expect(refused.text).toMatch(/from 10 to 500 US dollars/);
    }
    const misnamed = await send('/dashboard/topup', { cookie, origin: ownOrigin(), form: { amount_usd: '20' } });
    expect(misnamed.status).toBe(400);
    expect(misnamed.text).toContain('as the field &quot;amount&quot;');
    const total = await world.hive.db.query<{ count: number }>('SELECT count(*)::int AS count FROM hive.wallet_topups WHERE org_id = $1', [owner.orgId]);
    expect(total.rows[0]!.count).toBe(1);
  });
});

describe('signing out', () => {
  it('deletes the session on the server, so a copied cookie stops working', async () => {
    const owner = await signUp(world, 'logout-org');
    const { context, page } = await signedInPage(owner.email);
    const copied = (await sessionCookie(context))!.value;
    const before = await send('/dashboard', { cookie: copied });
    expect(before.status).toBe(200);
    expect(before.text).toContain('logout-org');

    await submit(page, page.getByRole('button', { name: 'Sign out' }));
    expect(pathOf(page)).toBe('/login');
    expect(await sessionCookie(context)).toBeUndefined();

    const after = await send('/dashboard', { cookie: copied });
    expect(after.status).toBe(303);
    expect(after.headers.get('location')).toBe('/login');
    const write = await send('/dashboard/approve', { cookie: copied, origin: ownOrigin(), form: { code: 'BCDF-GHJK', email: 'x@example.test', node: owner.rootPath, role: 'reader' } });
    expect(write.status).toBe(303);
    const { rows } = await world.hive.db.query<{ sessions: number; live_tokens: number }>(
      `SELECT (SELECT count(*)::int FROM hive.dashboard_sessions s JOIN hive.people p ON p.id = s.person_id WHERE p.email = $1) AS sessions,
              (SELECT count(*)::int FROM hive.tokens t JOIN hive.people p ON p.id = t.person_id WHERE p.email = $1 AND t.name = 'dashboard session' AND t.revoked_at IS NULL) AS live_tokens`,
      [owner.email],
    );
    expect(rows[0]).toEqual({ sessions: 0, live_tokens: 0 });
  });
});

describe('the pages for people with no credential', () => {
  it('describes the server at / and links to sign-in, signup and the device page', async () => {
    const { page } = await openPage();
    const home = await page.goto('/');
    expect(home?.status()).toBe(200);
    await expect(page.getByRole('heading', { level: 1 }).textContent()).resolves.toBe('Memory hive');
    for (const href of ['/login', '/signup', '/v1/device', '/docs']) expect(await page.locator(`main a[href="${href}"]`).count()).toBe(1);
  });

  it('signs up on /signup through POST /v1/signup, then signs in with that password', async () => {
    const { page } = await openPage();
    await page.goto('/signup');
    const email = `signup-page-${Date.now()}@example.test`;
    await page.getByLabel('Organisation name').fill('signup-page-org');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(OWNER_PASSWORD);
    await page.getByRole('button', { name: 'Sign up' }).click();
    await page.locator('#result.notice').waitFor();
    expect(await page.locator('#result').textContent()).toMatch(/Organisation signup-page-org created\. Your first token, shown only this once: hvt_/);
    await fillSignIn(page, email, OWNER_PASSWORD);
    expect(pathOf(page)).toBe('/dashboard');
  });
});
