import { createHash } from 'node:crypto';
import type { ApiKeyRow } from '../../shared/accounts/accounts.js';
import { DEVELOPER_SCOPES } from '../../shared/accounts/scopes.js';
import type { SessionAccount } from '../../shared/dashboard/sessions.js';
import { html, SafeHtml } from '../browser.js';

/**
 * The dashboard's server-rendered pages: plain HTML forms, no scripts. Every value is interpolated
 * through `html`, which escapes it unless it is markup that `html` itself produced, so a key name
 * or an email can never become markup (api/browser.ts).
 */

const STYLE = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1a1a1a; background: #fafafa; }
header { display: flex; gap: 1rem; align-items: center; justify-content: space-between; padding: .75rem 1.5rem; background: #1f2937; color: #fff; }
header form { margin: 0; }
main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .5rem; border-bottom: 1px solid #ddd; vertical-align: top; }
td form { margin: 0; }
label { font-weight: 600; }
fieldset label { font-weight: normal; display: inline-block; margin-right: 1rem; }
input[type=text], input[type=email], input[type=password], input[type=datetime-local] { display: block; padding: .4rem; width: 100%; max-width: 24rem; }
button { padding: .4rem .9rem; cursor: pointer; }
.error { color: #9b1c1c; background: #fdecec; border: 1px solid #f5b5b5; padding: .5rem .75rem; }
.new-key { background: #ecfdf3; border: 1px solid #86d4a5; padding: .75rem 1rem; }
.new-key code { display: block; padding: .5rem; background: #fff; overflow-wrap: anywhere; user-select: all; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;

/** Sent with every dashboard response: no scripts at all, forms only to this origin, never framed. */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

function layout(title: string, account: SessionAccount | undefined, body: SafeHtml): string {
  const header = account
    ? html`<header>
  <span>Signed in as ${account.email}</span>
  <form method="post" action="/app/logout"><button type="submit">Sign out</button></form>
</header>`
    : undefined;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · svc-platform dashboard</title>
<style>${new SafeHtml(STYLE)}</style>
</head>
<body>
${header}
<main>
${body}
</main>
</body>
</html>
`.markup;
}

export function loginPage(view: { error?: string; email?: string } = {}): string {
  return layout(
    'Sign in',
    undefined,
    html`<h1>Sign in</h1>
${view.error !== undefined && html`<p class="error" role="alert">${view.error}</p>`}
<form method="post" action="/app/login">
  <p><label for="email">Email</label> <input id="email" name="email" type="email" autocomplete="username" required value="${view.email ?? ''}"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password" required></p>
  <button type="submit">Sign in</button>
</form>`,
  );
}

/** What the create form held, given back when it has to be corrected. */
export interface KeyDraft {
  name: string;
  scopes: string[];
  expiresAt: string;
}

export interface ApiKeysView {
  account: SessionAccount;
  keys: ApiKeyRow[];
  /** Only on the response to the create form: the one time the plaintext is ever shown. */
  created?: { key: ApiKeyRow; plaintext: string };
  formError?: string;
  draft?: KeyDraft;
  now?: Date;
}

export function apiKeysPage(view: ApiKeysView): string {
  const now = view.now ?? new Date();
  const draft = view.draft ?? { name: '', scopes: [], expiresAt: '' };
  return layout(
    'API keys',
    view.account,
    html`<h1>API keys</h1>
${view.created && newKeyNotice(view.created)}
<section aria-labelledby="keys-title">
<h2 id="keys-title">Your keys</h2>
${view.keys.length === 0 ? html`<p>You have no API keys yet.</p>` : keyTable(view.keys, now)}
</section>
<section aria-labelledby="create-title">
<h2 id="create-title">Create a key</h2>
${view.formError !== undefined && html`<p class="error" role="alert">${view.formError}</p>`}
<form method="post" action="/app/api-keys">
  <p><label for="name">Name</label> <input id="name" name="name" type="text" required maxlength="80" value="${draft.name}"></p>
  <fieldset>
    <legend>Scopes (at least one)</legend>
    ${DEVELOPER_SCOPES.map(
      (scope) => html`<label><input type="checkbox" name="scopes" value="${scope}"${draft.scopes.includes(scope) && html` checked`}> ${scope}</label>
    `,
    )}
  </fieldset>
  <p><label for="expires_at">Expires at, UTC (optional)</label> <input id="expires_at" name="expires_at" type="datetime-local" value="${draft.expiresAt}"></p>
  <button type="submit">Create key</button>
</form>
</section>`,
  );
}

function newKeyNotice(created: { key: ApiKeyRow; plaintext: string }): SafeHtml {
  return html`<section class="new-key" role="status" aria-labelledby="new-key-title">
<h2 id="new-key-title">New key “${created.key.name}” created</h2>
<p>Copy it now: it is shown only this once and cannot be recovered.</p>
<code id="new-api-key">${created.plaintext}</code>
</section>`;
}

function keyTable(keys: ApiKeyRow[], now: Date): SafeHtml {
  return html`<table>
<thead><tr><th scope="col">Key</th><th scope="col">Name</th><th scope="col">Scopes</th><th scope="col">Expires</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${keys.map(
  (key) => html`<tr>
  <td><code>${key.display_prefix}…</code></td>
  <td>${key.name}</td>
  <td>${key.scopes.join(', ')}</td>
  <td>${key.expires_at ? html`${timeOf(key.expires_at)}${key.expires_at <= now && ' (expired)'}` : 'never'}</td>
  <td>${timeOf(key.created_at)}</td>
  <td><form method="post" action="/app/api-keys/${encodeURIComponent(key.id)}/revoke"><button type="submit">Revoke<span class="visually-hidden"> ${key.display_prefix} ${key.name}</span></button></form></td>
</tr>
`,
)}</tbody>
</table>`;
}

function timeOf(at: Date): SafeHtml {
  const iso = at.toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}
