import { Router, type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import type { HiveServices } from '../../../shared/composition/hive.js';
import { browseView, memoryView, organisationView, revokeCredential } from '../../../shared/hive/dashboard/page-data.js';
import { endSession, findSession, redeemOpenCode, SESSION_LIFETIME_MS, type NewSession, type SignedIn } from '../../../shared/hive/dashboard/sessions.js';
import { signIn } from '../../../shared/hive/dashboard/sign-in.js';
import { HiveError, hiveError } from '../../../shared/hive/errors.js';
import { approveDevice } from '../../../shared/hive/people.js';
import { createTopUpCheckout, TOP_UP_MAX_USD, TOP_UP_MIN_USD } from '../../../shared/hive/payments.js';
import { deviceApproveBody } from '../../../shared/hive/schemas.js';
import { readWallet } from '../../../shared/hive/wallet.js';
import { toServiceError } from '../../middleware/errors.js';
import { formBody } from '../../middleware/base-app.js';
import { storableInput } from '../../middleware/storable-input.js';
import { originOf, readCookie, sameOriginWrites, sendPage } from '../../browser.js';
import { pageSecurityPolicy } from '../views/html.js';
import { browsePage, dashboardPage, loginPage, memoryPage, messagePage, type BillingView, type DashboardNotices } from '../views/pages.js';

/**
 * The hive's browser routes (spec 3, "Browser routes"): sign-in with the signup address and
 * password, and the dashboard behind a cookie naming a server-side session. Pages are rendered on
 * the server as plain forms; every write must come from this origin (the Origin header), and every
 * read goes through the session's own token and the API's reach-scoped queries.
 */
const SESSION_COOKIE = 'hive_session';
/** Stripe Checkout's pages, where the top-up form's redirect leads (the pages' form-action allows it). */
const CHECKOUT_ORIGINS = ['https://checkout.stripe.com'];

const loginForm = z.object({
  email: z.string().trim().min(1).max(320),
  password: z.string().min(1).max(1024),
});
const approveForm = z.object({
  code: z.string(),
  email: z.string(),
  node: z.string(),
  role: z.string(),
  guardrail: z.literal('on').optional(),
  axiom: z.literal('on').optional(),
});
const revokeForm = z.object({ id: z.string().regex(/^(tok|mch)_[0-9A-Za-z]{24}$/, 'a credential id (tok_… or mch_…)') });
/** The form's amount as a number; its range and who may top up are createTopUpCheckout's rules. */
const topUpForm = z.object({ amount: z.coerce.number() });

export function dashboardRouter(hive: HiveServices): Router {
  const { db, config } = hive;
  const router = Router();
  const signedIn = requireSession(hive);
  const setSessionCookie = (req: Request, res: Response, session: NewSession) =>
    res.cookie(SESSION_COOKIE, session.secret, { ...cookieScope(req, config.HIVE_PUBLIC_BASE_URL), maxAge: SESSION_LIFETIME_MS });

  // Forms are urlencoded, and only these routes read them; the Origin check runs before any body is read.
  router.use(['/login', '/dashboard'], pageHeaders, sameOriginWrites(config.HIVE_PUBLIC_BASE_URL, () => hiveError(403, 'This form must be sent from the hive’s own pages (the Origin header is missing or names another site).')), formBody(16 * 1024), storableInput);

  // The cookie's path is /dashboard, so this page never sees a session: it always offers the form.
  router.get('/login', (_req, res) => {
    sendPage(res, 200, loginPage());
  });

  router.post('/login', async (req, res) => {
    const form = loginForm.safeParse(req.body);
    if (!form.success) return sendPage(res, 400, loginPage({ error: 'Give your email and password.' }));
    const result = await signIn(db, { ...form.data, place: req.ip ?? req.socket.remoteAddress ?? 'unknown' });
    if (result.outcome === 'locked') return sendPage(res, 429, loginPage({ error: result.message, email: form.data.email }));
    if (result.outcome === 'refused') return sendPage(res, 401, loginPage({ error: result.message, email: form.data.email }));
    setSessionCookie(req, res, result.session);
    res.redirect(303, '/dashboard');
  });

  // Where the client command's one-time link lands (POST /v1/dashboard/session mints it).
  router.get('/dashboard/open', async (req, res) => {
    const session = await redeemOpenCode(db, typeof req.query.code === 'string' ? req.query.code : undefined);
    if (!session) return sendPage(res, 401, messagePage('Link expired', 'This link has expired or was already used. Run the client command again, or sign in.'));
    setSessionCookie(req, res, session);
    res.redirect(303, '/dashboard');
  });

  router.post('/dashboard/logout', async (req, res) => {
    await endSession(db, readCookie(req, SESSION_COOKIE));
    res.clearCookie(SESSION_COOKIE, cookieScope(req, config.HIVE_PUBLIC_BASE_URL));
    res.redirect(303, '/login');
  });

  router.get('/dashboard', signedIn, async (req, res) => {
    const notice = req.query.topup === 'done' ? 'Thank you. The balance rises once the payment provider confirms the payment.' : req.query.topup === 'cancelled' ? 'The top-up was cancelled; nothing was charged.' : undefined;
    await renderDashboard(hive, res, 200, { notice });
  });

  router.get('/dashboard/browse', signedIn, async (req, res) => {
    const { credential, email } = sessionOf(res);
    const node = typeof req.query.node === 'string' && req.query.node !== '' ? req.query.node : undefined;
    const view = await browseView(db, credential, node);
    sendPage(res, view.selected === null ? 404 : 200, browsePage(view, email));
  });

  router.get('/dashboard/memory', signedIn, async (req, res) => {
    const { credential, email } = sessionOf(res);
    const id = typeof req.query.id === 'string' ? req.query.id : '';
    // The API's own read: a memory outside the grant is not there at all (404), as one that never was.
    if (!/^mem_[0-9A-Za-z]{24}$/.test(id)) throw hiveError(404, `No memory ${id}.`);
    sendPage(res, 200, memoryPage(await memoryView(db, credential, id), email));
  });

  router.post('/dashboard/approve', signedIn, async (req, res) => {
    const { credential } = sessionOf(res);
    const form = approveForm.safeParse(req.body);
    const draft = form.success ? { ...form.data } : {};
    try {
      if (!form.success) throw hiveError(400, 'The approval form is incomplete.');
      const input = deviceApproveBody.parse({ ...form.data, guardrail: form.data.guardrail === 'on', axiom: form.data.axiom === 'on' });
      const approved = await approveDevice(db, credential, input);
      await renderDashboard(hive, res, 200, { notice: `Approved ${approved.person.email} as ${approved.grant.role} on ${approved.grant.node.path}: their client now finishes signing in.` });
    } catch (error) {
      const failure = toHiveError(error);
      await renderDashboard(hive, res, failure.status, { error: failure.message, approveDraft: draft as Record<string, string> });
    }
  });

  router.post('/dashboard/revoke', signedIn, async (req, res) => {
    const { credential } = sessionOf(res);
    try {
      const form = revokeForm.safeParse(req.body);
      if (!form.success) throw hiveError(400, 'Name the credential to revoke.');
      await revokeCredential(db, credential, form.data.id);
      await renderDashboard(hive, res, 200, { notice: `Revoked ${form.data.id}: it is refused from now on.` });
    } catch (error) {
      const failure = toHiveError(error);
      await renderDashboard(hive, res, failure.status, { error: failure.message });
    }
  });

  // Starts a Stripe Checkout and sends the browser there; only the payment provider's webhook credits.
  router.post('/dashboard/topup', signedIn, async (req, res) => {
    const { credential } = sessionOf(res);
    try {
      const form = topUpForm.safeParse(req.body);
      // A post without the form's field says so, rather than quoting a range the sender never tried.
      if (!form.success) throw hiveError(400, req.body?.amount === undefined ? 'A top-up form sends its amount in US dollars as the field "amount".' : `A top-up is from ${TOP_UP_MIN_USD} to ${TOP_UP_MAX_USD} US dollars.`);
      const origin = publicOrigin(req, config.HIVE_PUBLIC_BASE_URL);
      const checkout = await createTopUpCheckout(hive, {
        orgId: credential.orgId,
        personId: credential.personId,
        amountUsd: form.data.amount,
        successUrl: `${origin}/dashboard?topup=done`,
        cancelUrl: `${origin}/dashboard?topup=cancelled`,
      });
      res.redirect(303, checkout.url);
    } catch (error) {
      const failure = toHiveError(error);
      await renderDashboard(hive, res, failure.status, { error: failure.message });
    }
  });

  router.use(['/login', '/dashboard'], pageErrors);
  return router;
}

async function renderDashboard(hive: HiveServices, res: Response, status: number, notices: DashboardNotices): Promise<void> {
  const session = sessionOf(res);
  const view = await organisationView(hive.db, session);
  const billing = view.admin ? await billingOf(hive, session.credential.orgId) : undefined;
  sendPage(res, status, dashboardPage(view, { ...notices, billing, topUp: view.admin && hive.stripe ? { min: TOP_UP_MIN_USD, max: TOP_UP_MAX_USD } : null }));
}

async function billingOf(hive: HiveServices, orgId: string): Promise<BillingView> {
  const wallet = await readWallet(hive.db, orgId);
  return {
    balanceUsd: usdOf(wallet.balanceMicros),
    suspended: wallet.suspended,
    entries: wallet.entries.map((entry) => ({ kind: entry.kind, amountUsd: usdOf(entry.amountMicros), reference: entry.reference, createdAt: entry.createdAt })),
  };
}

/** Micro-dollars as US dollars, with cents always and smaller fractions only when there are some. */
export function usdOf(micros: bigint): string {
  const sign = micros < 0n ? '-' : '';
  const magnitude = micros < 0n ? -micros : micros;
  const fraction = (magnitude % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${sign}${magnitude / 1_000_000n}.${fraction}`;
}

const pageHeaders: RequestHandler = (_req, res, next) => {
  // Pages show memories and credentials: no cache or proxy keeps a copy, no other site frames them.
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Security-Policy', pageSecurityPolicy(CHECKOUT_ORIGINS));
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
  next();
};

/** Where a browser reaches this hive: HIVE_PUBLIC_BASE_URL behind a proxy, else the address the request used. */
export function publicOrigin(req: Request, publicBaseUrl: string | undefined): string {
  return (publicBaseUrl && originOf(publicBaseUrl)) ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`;
}

/** Pages behind sign-in: without a live session the browser is sent to the sign-in page. */
function requireSession(hive: HiveServices): RequestHandler {
  return async (req, res, next) => {
    const secret = readCookie(req, SESSION_COOKIE);
    const session = await findSession(hive.db, secret);
    if (!session) {
      if (secret !== undefined) res.clearCookie(SESSION_COOKIE, cookieScope(req, hive.config.HIVE_PUBLIC_BASE_URL));
      return res.redirect(303, '/login');
    }
    res.locals.hiveSession = session;
    next();
  };
}

function sessionOf(res: Response): SignedIn {
  const session = res.locals.hiveSession as SignedIn | undefined;
  if (!session) throw new Error('dashboard route reached without requireSession');
  return session;
}

/**
 * HttpOnly keeps the secret from scripts; Secure wherever the browser reached the hive over TLS;
 * SameSite=Lax keeps it off other sites' posts; Path=/dashboard keeps it off the API.
 */
function cookieScope(req: Request, publicBaseUrl: string | undefined) {
  const overTls = req.secure || publicBaseUrl?.startsWith('https:') === true;
  return { httpOnly: true, secure: overTls, sameSite: 'lax', path: '/dashboard' } as const;
}

/** A HiveError as it is; anything else (a zod failure, the body parser's refusals, a bug) as the hive's API would answer it. */
function toHiveError(error: unknown): HiveError {
  if (error instanceof HiveError) return error;
  const failure = toServiceError(error);
  return new HiveError(failure.status, failure.message);
}

/** A browser gets its refusal as a page, with the status the API would answer. */
const pageErrors: ErrorRequestHandler = (error: unknown, req, res, next) => {
  const failure = toHiveError(error);
  if (failure.status >= 500) req.log.error({ err: error }, 'request failed');
  if (res.headersSent) return next(error);
  const session = res.locals.hiveSession as SignedIn | undefined;
  const title = failure.status === 404 ? 'Not found' : failure.status === 403 ? 'Not allowed' : 'Something went wrong';
  sendPage(res, failure.status, messagePage(title, failure.status >= 500 ? 'The hive could not answer; try again shortly.' : failure.message, session?.email));
};
