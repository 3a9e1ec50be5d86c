import { Router, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { createApiKey, listApiKeys, revokeApiKey } from '../../shared/accounts/accounts.js';
import { DEVELOPER_SCOPES } from '../../shared/accounts/scopes.js';
import { findSessionAccount, SESSION_LIFETIME_MS, signIn, signOut, type SessionAccount } from '../../shared/dashboard/sessions.js';
import type { Db } from '../../shared/db/pool.js';
import { serviceError } from '../../shared/errors.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { formBody } from '../middleware/base-app.js';
import { storableInput } from '../middleware/storable-input.js';
import { readCookie, sameOriginWrites, sendPage } from '../browser.js';
import { apiKeysPage, DASHBOARD_CSP, loginPage, type KeyDraft } from './pages.js';

const LOGIN_PATH = '/app/login';
const KEYS_PATH = '/app/api-keys';
const SESSION_COOKIE = 'svc_session';
// Secure and HttpOnly keep the token off plain HTTP and away from scripts; SameSite=Lax keeps it
// off cross-site posts; Path=/app keeps it away from the /v1 API on the same origin.
const COOKIE_SCOPE = { httpOnly: true, secure: true, sameSite: 'lax', path: '/app' } as const;

/** One message for every refused sign-in, so the page does not tell which emails have accounts. */
const SIGN_IN_REFUSED = 'The email or password is not right.';

const loginForm = z.object({
  email: z.string().trim().min(1).max(320),
  password: z.string().min(1).max(1024),
});

const keyForm = z.object({
  name: z.string().trim().min(1, { error: 'Give the key a name.' }).max(80, { error: 'A key name is at most 80 characters.' }),
  // A single checked box arrives as a string, several as an array, none as nothing.
  scopes: z.preprocess(
    (value) => (value === undefined ? [] : [value].flat()),
    z.array(z.enum(DEVELOPER_SCOPES)).min(1, { error: 'Choose at least one scope.' }),
  ),
  expires_at: z
    .string()
    .trim()
    .optional()
    .transform((text, ctx) => {
      if (!text) return null;
      const at = parseUtcDateTime(text);
      if (!at) ctx.issues.push({ code: 'custom', input: text, message: 'The expiry must be a date, or a date and time (UTC).' });
      else if (at.getTime() <= Date.now()) ctx.issues.push({ code: 'custom', input: text, message: 'The expiry must be in the future.' });
      return at ?? null;
    }),
});

/**
 * The developer dashboard under /app: sign in with email and password, then list, create and
 * revoke ko_ keys. Server-rendered forms; the session is a cookie naming a row in PostgreSQL.
 */
export function dashboardRoutes({ db, config }: GatewayServices): Router {
  const router = Router();
  const signedIn = requireSession(db);

  // Forms are urlencoded; only the dashboard parses them. The Origin check runs before the body is read.
  router.use('/app', dashboardHeaders, sameOriginWrites(config.PUBLIC_BASE_URL, () => serviceError('dashboard_origin_mismatch')), formBody(16 * 1024), storableInput);

  router.get('/app', (_req, res) => res.redirect(303, KEYS_PATH));

  router.get(LOGIN_PATH, async (req, res) => {
    if (await findSessionAccount(db, readCookie(req, SESSION_COOKIE))) return res.redirect(303, KEYS_PATH);
    sendPage(res, 200, loginPage());
  });

  router.post(LOGIN_PATH, async (req, res) => {
    const form = loginForm.safeParse(req.body);
    const session = form.success ? await signIn(db, form.data) : undefined;
    if (!session) return sendPage(res, 401, loginPage({ error: SIGN_IN_REFUSED, email: form.data?.email ?? '' }));
    res.cookie(SESSION_COOKIE, session.token, { ...COOKIE_SCOPE, maxAge: SESSION_LIFETIME_MS });
    res.redirect(303, KEYS_PATH);
  });

  router.post('/app/logout', async (req, res) => {
    await signOut(db, readCookie(req, SESSION_COOKIE));
    res.clearCookie(SESSION_COOKIE, COOKIE_SCOPE);
    res.redirect(303, LOGIN_PATH);
  });

  router.get(KEYS_PATH, signedIn, async (_req, res) => {
    const account = sessionAccountOf(res);
    sendPage(res, 200, apiKeysPage({ account, keys: await listApiKeys(db, account.accountId) }));
  });

  // Answered with the page itself, not a redirect: this response is the only place the plaintext appears.
  router.post(KEYS_PATH, signedIn, async (req, res) => {
    const account = sessionAccountOf(res);
    const form = keyForm.safeParse(req.body);
    if (!form.success) {
      const formError = form.error.issues[0]?.message ?? 'The form is invalid.';
      return sendPage(res, 400, apiKeysPage({ account, keys: await listApiKeys(db, account.accountId), formError, draft: draftOf(req.body) }));
    }
    const created = await createApiKey(db, account.accountId, { name: form.data.name, scopes: form.data.scopes, expiresAt: form.data.expires_at });
    sendPage(res, 200, apiKeysPage({ account, keys: await listApiKeys(db, account.accountId), created }));
  });

  router.post('/app/api-keys/:id/revoke', storableInput, signedIn, async (req, res) => {
    await revokeApiKey(db, sessionAccountOf(res).accountId, String(req.params.id));
    res.redirect(303, KEYS_PATH);
  });

  return router;
}

const dashboardHeaders: RequestHandler = (_req, res, next) => {
  // A page may show a key's plaintext once; no cache, proxy or back button may keep a copy.
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
  next();
};

/** Pages behind sign-in; without a live session the browser is sent to the sign-in page. */
function requireSession(db: Db): RequestHandler {
  return async (req, res, next) => {
    const token = readCookie(req, SESSION_COOKIE);
    const account = await findSessionAccount(db, token);
    if (!account) {
      if (token !== undefined) res.clearCookie(SESSION_COOKIE, COOKIE_SCOPE);
      return res.redirect(303, LOGIN_PATH);
    }
    res.locals.dashboardAccount = account;
    next();
  };
}

function sessionAccountOf(res: Response): SessionAccount {
  const account = res.locals.dashboardAccount as SessionAccount | undefined;
  if (!account) throw new Error('dashboard route reached without requireSession');
  return account;
}

/** What the create form held, to give it back with the message when it must be corrected. */
function draftOf(body: unknown): KeyDraft {
  const fields: Record<string, unknown> = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  return {
    name: text(fields.name),
    scopes: [fields.scopes].flat().filter((scope): scope is string => typeof scope === 'string'),
    expiresAt: text(fields.expires_at),
  };
}

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?Z?)?$/;

/**
 * A date, or a date and time, as a datetime-local input sends it, read as UTC: a form without
 * scripts cannot know the browser's time zone, so the page says UTC.
 */
function parseUtcDateTime(text: string): Date | undefined {
  const match = DATE_TIME.exec(text);
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number];
  const at = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  // Date.UTC rolls 31 February into March and 24:00 into the next day; neither is what was typed.
  const typed = [year, month - 1, day, hour, minute, second];
  const read = [at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate(), at.getUTCHours(), at.getUTCMinutes(), at.getUTCSeconds()];
  return typed.every((value, index) => value === read[index]) ? at : undefined;
}
