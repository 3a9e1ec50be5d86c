import { createHash } from 'node:crypto';
import { html, SafeHtml } from '../../browser.js';

/** The hive's page layout, style and security policy, on the dashboards' shared template (api/browser.ts). */
export { html, SafeHtml } from '../../browser.js';

/** A timestamp as people read it, with the machine-readable value beside it. */
export function timeOf(at: Date | string): SafeHtml {
  const iso = typeof at === 'string' ? at : at.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}

const STYLE = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1a1a1a; background: #fafafa; }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; justify-content: space-between; padding: .75rem 1.5rem; background: #1f3a2e; color: #fff; }
header a { color: #fff; }
header nav { display: flex; gap: 1rem; align-items: center; }
header form { margin: 0; }
main { max-width: 64rem; margin: 0 auto; padding: 1.5rem; }
section { margin-bottom: 2rem; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .45rem; border-bottom: 1px solid #ddd; vertical-align: top; }
td form { margin: 0; }
label { font-weight: 600; }
input[type=text], input[type=email], input[type=password], input[type=number], select { display: block; padding: .4rem; width: 100%; max-width: 24rem; }
fieldset label { font-weight: normal; }
button { padding: .4rem .9rem; cursor: pointer; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fff; border: 1px solid #ddd; padding: .75rem; }
.error { color: #9b1c1c; background: #fdecec; border: 1px solid #f5b5b5; padding: .5rem .75rem; }
.notice { background: #ecfdf3; border: 1px solid #86d4a5; padding: .5rem .75rem; }
.muted { color: #555; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

/**
 * The one script of the hive's pages, on the signup page: it posts the form to POST /v1/signup as
 * JSON (the API's only signup route) and shows the first token once. Set with textContent only.
 */
export const SIGNUP_SCRIPT = `
document.getElementById('signup').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const body = { email: form.get('email'), password: form.get('password'), organisation: form.get('organisation') };
  const response = await fetch('/v1/signup', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await response.json();
  const result = document.getElementById('result');
  if (!response.ok) { result.className = 'error'; result.textContent = answer.error; return; }
  result.className = 'notice';
  result.textContent = 'Organisation ' + answer.organisation.name + ' created. Your first token, shown only this once: ' + answer.token.token + ' (now sign in at /login).';
});
`;

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64');

/**
 * Sent with every page of the hive: no script but the signup page's own, styles only this
 * module's, forms only to this origin (and the payment provider's checkout, where a top-up form's
 * redirect leads), never framed.
 */
export function pageSecurityPolicy(checkoutOrigins: readonly string[]): string {
  return [
    "default-src 'none'",
    `style-src 'sha256-${sha256(STYLE)}'`,
    `script-src 'sha256-${sha256(SIGNUP_SCRIPT)}'`,
    "connect-src 'self'",
    `form-action 'self'${checkoutOrigins.map((origin) => ` ${origin}`).join('')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export interface LayoutOptions {
  /** The signed-in person: the header then shows the dashboard's navigation and sign-out. */
  signedInAs?: string;
  /** The one script a page may carry (the signup page's). */
  script?: SafeHtml;
}

/** The small layout every hive page shares. */
export function layout(title: string, body: SafeHtml, options: LayoutOptions = {}): string {
  const header = options.signedInAs
    ? html`<header>
  <nav aria-label="Dashboard"><strong>Memory hive</strong> <a href="/dashboard">Organisation</a> <a href="/dashboard/browse">Browse</a></nav>
  <nav aria-label="Account"><span>Signed in as ${options.signedInAs}</span>
  <form method="post" action="/dashboard/logout"><button type="submit">Sign out</button></form></nav>
</header>`
    : html`<header><nav aria-label="Site"><a href="/"><strong>Memory hive</strong></a> <a href="/login">Sign in</a> <a href="/docs">Reference</a></nav></header>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · memory hive</title>
<style>${new SafeHtml(STYLE)}</style>
</head>
<body>
${header}
<main>
${body}
</main>
${options.script}
</body>
</html>
`.markup;
}

/** The signup page's script element (its body is the hashed constant above). */
export const signupScript = new SafeHtml(`<script>${SIGNUP_SCRIPT}</script>`);
