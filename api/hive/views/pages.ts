import type { BrowseView, memoryView, NodeView, OrganisationView } from '../../../shared/hive/dashboard/page-data.js';
import { ROLES } from '../../../shared/hive/roles.js';
import { html, layout, signupScript, timeOf, type SafeHtml } from './html.js';

/**
 * The hive's server-rendered pages: the front page, signup and sign-in for people with no
 * credential, and the dashboard for a signed-in person. Plain forms; every value goes through
 * `html`, which escapes it.
 */

/** GET /: what this server is, and where to go from here. */
export function homePage(view: { signupOpen: boolean }): string {
  return layout(
    'Memory hive',
    html`<h1>Memory hive</h1>
<p>This server is a memory hive: a shared memory store for coding agents and the people they work with, organised by organisation, project and node. Agents remember, recall and brief sessions through its API; people sign in here to see their organisation and browse what it remembers.</p>
<ul>
  <li><a href="/login">Sign in</a> to the dashboard with your address and password.</li>
  ${view.signupOpen && html`<li><a href="/signup">Sign up</a>: create an organisation and its owner.</li>`}
  <li><a href="/v1/device">Approve a device</a>: type the code someone's client shows.</li>
  <li><a href="/docs">Reference</a> for people, <a href="/llms.txt">/llms.txt</a> for agents, <a href="/v1/health">/v1/health</a> for the server's state.</li>
</ul>`,
  );
}

/** GET /signup (only where the server takes signups). */
export function signupPage(): string {
  return layout(
    'Sign up',
    html`<h1>Create an organisation</h1>
<p>You become its owner. Its name is lowercase letters, digits, dots, underscores and dashes. The password is the one you sign in to this dashboard with (at least 12 characters).</p>
<form id="signup">
  <p><label for="organisation">Organisation name</label> <input id="organisation" name="organisation" type="text" required maxlength="63" autocomplete="organization"></p>
  <p><label for="email">Email</label> <input id="email" name="email" type="email" required autocomplete="username"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password" required minlength="12" autocomplete="new-password"></p>
  <button type="submit">Sign up</button>
</form>
<p id="result" role="status"></p>`,
    { script: signupScript },
  );
}

export function loginPage(view: { error?: string; email?: string } = {}): string {
  return layout(
    'Sign in',
    html`<h1>Sign in</h1>
${view.error !== undefined && html`<p class="error" role="alert">${view.error}</p>`}
<form method="post" action="/login">
  <p><label for="email">Email</label> <input id="email" name="email" type="email" autocomplete="username" required value="${view.email ?? ''}"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password" required></p>
  <button type="submit">Sign in</button>
</form>
<p class="muted">Holding a token instead? <code>POST /v1/dashboard/session</code> answers a one-time link that opens the dashboard signed in.</p>`,
  );
}

/** A page that only says something: an error, or an expired link. */
export function messagePage(title: string, message: string, signedInAs?: string): string {
  return layout(
    title,
    html`<h1>${title}</h1>
<p class="error" role="alert">${message}</p>
<p><a href="${signedInAs ? '/dashboard' : '/login'}">${signedInAs ? 'Back to the dashboard' : 'Sign in'}</a></p>`,
    { signedInAs },
  );
}

export interface BillingView {
  balanceUsd: string;
  suspended: boolean;
  entries: Array<{ kind: string; amountUsd: string; reference: string | null; createdAt: Date }>;
}

export interface DashboardNotices {
  notice?: string;
  error?: string;
  /** The approve form's fields, given back when it must be corrected. */
  approveDraft?: Record<string, string>;
  billing?: BillingView | null;
  topUp?: { min: number; max: number } | null;
}

/** GET /dashboard: the organisation, its seats, and for an admin its billing, people and credentials. */
export function dashboardPage(view: OrganisationView, notices: DashboardNotices = {}): string {
  return layout(
    view.organisation.name,
    html`<h1>${view.organisation.name}</h1>
${notices.notice !== undefined && html`<p class="notice" role="status">${notices.notice}</p>`}
${notices.error !== undefined && html`<p class="error" role="alert">${notices.error}</p>`}
<section aria-labelledby="grant-title">
<h2 id="grant-title">Your grant</h2>
${nodeTable(view.nodes)}
</section>
<section aria-labelledby="seats-title">
<h2 id="seats-title">Seats</h2>
<p><span id="seat-count">${view.seats}</span> ${view.seats === 1 ? 'person has' : 'people have'} a seat in this organisation.</p>
</section>
${view.approver && approveSection(view, notices.approveDraft ?? {})}
${view.admin && notices.billing !== undefined && billingSection(notices.billing, notices.topUp ?? null)}
${view.people && peopleSection(view.people)}
${view.credentials && credentialsSection(view.credentials)}
${view.machines && machinesSection(view.machines)}`,
    { signedInAs: view.email },
  );
}

function nodeTable(nodes: NodeView[]): SafeHtml {
  if (nodes.length === 0) return html`<p>You hold no role on any node.</p>`;
  return html`<table>
<thead><tr><th scope="col">Node</th><th scope="col">Your role</th></tr></thead>
<tbody>
${nodes.map((node) => html`<tr><td><a href="/dashboard/browse?node=${encodeURIComponent(node.id)}">${node.path}</a></td><td>${node.role}</td></tr>
`)}</tbody>
</table>`;
}

function approveSection(view: OrganisationView, draft: Record<string, string>): SafeHtml {
  const adminNodes = view.nodes.filter((node) => node.role === 'admin' || node.role === 'owner');
  return html`<section aria-labelledby="approve-title">
<h2 id="approve-title">Approve a device code</h2>
<p>Type the code the person's client shows them. Codes waiting for approval are never listed.</p>
<form method="post" action="/dashboard/approve">
  <p><label for="approve-code">Code</label> <input id="approve-code" name="code" type="text" required autocomplete="off" autocapitalize="characters" value="${draft.code ?? ''}"></p>
  <p><label for="approve-email">Their email</label> <input id="approve-email" name="email" type="email" required value="${draft.email ?? ''}"></p>
  <p><label for="approve-node">Node</label> <select id="approve-node" name="node">
    ${adminNodes.map((node) => html`<option value="${node.path}"${draft.node === node.path && html` selected`}>${node.path}</option>`)}
  </select></p>
  <p><label for="approve-role">Role</label> <select id="approve-role" name="role">
    ${ROLES.map((role) => html`<option${(draft.role ?? 'member') === role && html` selected`}>${role}</option>`)}
  </select></p>
  <fieldset><legend>Authority to pass on (owners holding it only)</legend>
    <label><input type="checkbox" name="guardrail" value="on"${draft.guardrail === 'on' && html` checked`}> guardrail</label>
    <label><input type="checkbox" name="axiom" value="on"${draft.axiom === 'on' && html` checked`}> axiom</label>
  </fieldset>
  <button type="submit">Approve</button>
</form>
</section>`;
}

function billingSection(billing: BillingView | null, topUp: { min: number; max: number } | null): SafeHtml {
  return html`<section aria-labelledby="billing-title">
<h2 id="billing-title">Billing</h2>
${billing === null
  ? html`<p>The wallet is not available on this server.</p>`
  : html`<p>Balance: <strong id="wallet-balance">${billing.balanceUsd} USD</strong>${billing.suspended && html` <span class="error">suspended</span>`}</p>
${billing.entries.length === 0
  ? html`<p>No wallet entries yet.</p>`
  : html`<table>
<thead><tr><th scope="col">When</th><th scope="col">Kind</th><th scope="col">Amount (USD)</th><th scope="col">Reference</th></tr></thead>
<tbody>
${billing.entries.map((entry) => html`<tr><td>${timeOf(entry.createdAt)}</td><td>${entry.kind}</td><td>${entry.amountUsd}</td><td>${entry.reference ?? ''}</td></tr>
`)}</tbody>
</table>`}`}
${topUp && html`<form method="post" action="/dashboard/topup">
  <p><label for="topup-amount">Top up (US dollars, ${topUp.min} to ${topUp.max})</label> <input id="topup-amount" name="amount" type="number" required min="${topUp.min}" max="${topUp.max}" step="1" value="${topUp.min}"></p>
  <button type="submit">Pay by card</button>
</form>`}
</section>`;
}

function peopleSection(people: NonNullable<OrganisationView['people']>): SafeHtml {
  return html`<section aria-labelledby="people-title">
<h2 id="people-title">People</h2>
<table>
<thead><tr><th scope="col">Email</th><th scope="col">Roles</th><th scope="col">Authority</th><th scope="col">Since</th></tr></thead>
<tbody>
${people.map((person) => html`<tr>
  <td>${person.email}</td>
  <td>${person.grants.length === 0 ? 'none' : person.grants.map((grant, index) => html`${index > 0 && ', '}${grant.role} on ${grant.path}`)}</td>
  <td>${[person.guardrail_authority && 'guardrail', person.axiom_authority && 'axiom'].filter(Boolean).join(', ') || 'none'}</td>
  <td>${timeOf(person.created_at)}</td>
</tr>
`)}</tbody>
</table>
</section>`;
}

function credentialsSection(credentials: NonNullable<OrganisationView['credentials']>): SafeHtml {
  return html`<section aria-labelledby="credentials-title">
<h2 id="credentials-title">Credentials</h2>
${credentials.length === 0
  ? html`<p>No live credentials.</p>`
  : html`<table>
<thead><tr><th scope="col">Token</th><th scope="col">Name</th><th scope="col">Carries</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${credentials.map((token) => html`<tr>
  <td><code>${token.display_prefix}…</code></td>
  <td>${token.name ?? ''}</td>
  <td>${token.email ?? html`${token.grant_role} on ${token.grant_path}`}</td>
  <td>${timeOf(token.created_at)}</td>
  <td>${token.expires_at ? timeOf(token.expires_at) : 'never'}</td>
  <td><form method="post" action="/dashboard/revoke"><input type="hidden" name="id" value="${token.id}"><button type="submit">Revoke<span class="visually-hidden"> ${token.display_prefix} ${token.name ?? ''}</span></button></form></td>
</tr>
`)}</tbody>
</table>`}
</section>`;
}

function machinesSection(machines: NonNullable<OrganisationView['machines']>): SafeHtml {
  return html`<section aria-labelledby="machines-title">
<h2 id="machines-title">Machines</h2>
${machines.length === 0
  ? html`<p>No machines are enrolled.</p>`
  : html`<table>
<thead><tr><th scope="col">Name</th><th scope="col">Kind</th><th scope="col">Person</th><th scope="col">Status</th><th scope="col">Expires</th><th scope="col">Last seen</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>
${machines.map((machine) => html`<tr>
  <td>${machine.name}</td>
  <td>${machine.kind}</td>
  <td>${machine.person.email}</td>
  <td>${machine.status}</td>
  <td>${machine.expires_at ? timeOf(machine.expires_at) : 'never'}</td>
  <td>${machine.last_seen_at ? timeOf(machine.last_seen_at) : 'never'}</td>
  <td>${machine.status === 'active' && html`<form method="post" action="/dashboard/revoke"><input type="hidden" name="id" value="${machine.id}"><button type="submit">Revoke<span class="visually-hidden"> machine ${machine.name}</span></button></form>`}</td>
</tr>
`)}</tbody>
</table>`}
</section>`;
}

/** GET /dashboard/browse. */
export function browsePage(view: BrowseView, email: string): string {
  const heading = view.selected ? html`Memories in ${view.selected.path}` : 'Memories in your grant';
  return layout(
    'Browse',
    html`<h1>Browse</h1>
<nav aria-labelledby="nodes-title">
<h2 id="nodes-title">Nodes</h2>
<ul>
  <li><a href="/dashboard/browse">Everything in your grant</a></li>
  ${view.nodes.map((node) => html`<li><a href="/dashboard/browse?node=${encodeURIComponent(node.id)}"${view.selected?.id === node.id && html` aria-current="page"`}>${node.path}</a> <span class="muted">(${node.role})</span></li>`)}
</ul>
</nav>
<section aria-labelledby="memories-title">
${view.selected === null
  ? html`<h2 id="memories-title">Nothing here</h2><p>No node of your grant has that name.</p>`
  : html`<h2 id="memories-title">${heading}</h2>
${view.memories.length === 0
  ? html`<p>No memories here yet.</p>`
  : html`<table>
<thead><tr><th scope="col">Title</th><th scope="col">Node</th><th scope="col">Scope</th><th scope="col">Kind</th><th scope="col">Written</th></tr></thead>
<tbody>
${view.memories.map((memory) => html`<tr>
  <td><a href="/dashboard/memory?id=${encodeURIComponent(memory.id)}">${memory.title}</a>${memory.pinned && html` <span class="muted">(pinned)</span>`}</td>
  <td>${memory.node_path}</td>
  <td>${memory.scope}</td>
  <td>${memory.kind}</td>
  <td>${timeOf(memory.updated_at)}</td>
</tr>
`)}</tbody>
</table>
${view.memories.length === view.limit && html`<p class="muted">The ${view.limit} most recently written; choose a node to see others.</p>`}`}`}
</section>`,
    { signedInAs: email },
  );
}

/** GET /dashboard/memory. */
export function memoryPage(memory: Awaited<ReturnType<typeof memoryView>>, email: string): string {
  const who = (by: { email: string | null } | null) => by?.email ?? 'unknown';
  return layout(
    memory.title,
    html`<p><a href="/dashboard/browse?node=${encodeURIComponent(memory.node.id)}">${memory.node.path}</a> / ${memory.scope}</p>
<h1>${memory.title}</h1>
<p class="muted">${memory.kind}${memory.pinned && ', pinned'} · version ${memory.version} · ${memory.status}</p>
${memory.body === null ? html`<p>This memory was forgotten; only its tombstone is left.</p>` : html`<pre id="memory-body">${memory.body}</pre>`}
<h2>Provenance</h2>
<ul>
  <li>Created by ${who(memory.provenance.created.by)}, ${timeOf(memory.provenance.created.at)}${memory.provenance.created.source && html`, from ${memory.provenance.created.source}`}</li>
  <li>Last written by ${who(memory.provenance.updated.by)}, ${timeOf(memory.provenance.updated.at)}</li>
  ${memory.provenance.verified && html`<li>Verified by ${who(memory.provenance.verified.by)}, ${timeOf(memory.provenance.verified.at)}</li>`}
  ${memory.provenance.forgotten && html`<li>Forgotten by ${who(memory.provenance.forgotten.by)}, ${timeOf(memory.provenance.forgotten.at)}</li>`}
</ul>
${memory.versions.length > 0 && html`<h2>Earlier versions</h2>
${memory.versions.map((version) => html`<h3>Version ${version.version}: ${version.title}</h3>
<p class="muted">${version.kind} in ${version.scope}, written by ${who(version.written.by)}, ${timeOf(version.written.at)}</p>
<pre>${version.body}</pre>
`)}`}`,
    { signedInAs: email },
  );
}
