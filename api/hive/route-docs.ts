import { z } from 'zod';
import type { HiveRouteDefinition } from './route-table.js';
import { escapeHtml } from '../browser.js';

/**
 * The hive's docs (GET /llms.txt, GET /docs), written from the route table itself: each route's
 * method, path, summary, access and body schema. A route added to the table is documented by
 * that alone, so the docs cannot drift from the API.
 */
export interface RouteDoc {
  method: string;
  path: string;
  summary: string;
  access: 'public' | 'credential';
  /** One list of fields per body shape (several for a route whose body is chosen by `action`). */
  bodies: FieldDoc[][];
}

export interface FieldDoc {
  name: string;
  type: string;
  required: boolean;
  description?: string;
}

export function routeDocs(definitions: readonly HiveRouteDefinition[]): RouteDoc[] {
  return definitions.map((definition) => ({
    method: definition.method.toUpperCase(),
    path: definition.path,
    summary: definition.summary,
    access: definition.access,
    bodies: definition.body ? bodyShapes(definition.body) : [],
  }));
}

type JsonSchema = { type?: string | string[]; properties?: Record<string, JsonSchema>; required?: string[]; anyOf?: JsonSchema[]; oneOf?: JsonSchema[]; allOf?: JsonSchema[]; enum?: unknown[]; const?: unknown; items?: JsonSchema; description?: string; format?: string; default?: unknown };

function bodyShapes(schema: z.ZodType): FieldDoc[][] {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const variants = json.oneOf ?? json.anyOf ?? [json];
  return variants.map((variant) =>
    Object.entries(variant.properties ?? {}).map(([name, field]) => ({
      name,
      type: typeOf(field),
      required: (variant.required ?? []).includes(name) && field.default === undefined,
      ...(field.description && { description: field.description }),
    })),
  );
}

function typeOf(field: JsonSchema): string {
  if (field.const !== undefined) return JSON.stringify(field.const);
  if (field.enum) return field.enum.map((value) => JSON.stringify(value)).join(' | ');
  const choices = field.anyOf ?? field.oneOf;
  if (choices) return choices.map(typeOf).join(' | ');
  if (field.type === 'array') return `${field.items ? typeOf(field.items) : 'any'}[]`;
  if (field.type === 'object' && field.properties) {
    return `{ ${Object.entries(field.properties).map(([name, inner]) => `${name}${(field.required ?? []).includes(name) && inner.default === undefined ? '' : '?'}: ${typeOf(inner)}`).join(', ')} }`;
  }
  const base = Array.isArray(field.type) ? field.type.join(' | ') : (field.type ?? 'any');
  return field.format ? `${base} (${field.format})` : base;
}

const fieldLine = (field: FieldDoc): string => `${field.name}${field.required ? '' : '?'}: ${field.type}`;

/** GET /llms.txt: plain text for an agent given only the server's URL. */
export function renderLlmsTxt(origin: string, docs: RouteDoc[]): string {
  const lines = [
    '# Memory hive',
    '',
    '> A shared memory store for coding agents and their people: remember things on a node of your organisation, recall them ranked, brief a session, keep tasks.',
    '',
    `Base URL: ${origin}`,
    'Every API route is POST with a JSON body (an empty body reads as {}) unless marked GET; unknown body fields are refused.',
    'Authentication: Authorization: Bearer <token> on every route marked [token]. Errors: {"error": "<message>"} with 400 bad request, 401 no credential, 403 no grant, 404 nothing there, 409 a guard refused.',
    'A node is named by its id (nd_…) or its path of names from the organisation down (acme/backend).',
    '',
    '## Routes',
    '',
  ];
  for (const doc of docs) {
    lines.push(`- ${doc.method} ${doc.path} [${doc.access === 'public' ? 'no credential' : 'token'}]: ${doc.summary}`);
    doc.bodies.forEach((fields, index) => {
      if (fields.length === 0) return;
      lines.push(`  body${doc.bodies.length > 1 ? ` (${index + 1})` : ''}: { ${fields.map(fieldLine).join(', ')} }`);
    });
  }
  lines.push('', `Full reference: ${origin}/docs`, '');
  return lines.join('\n');
}

/** GET /docs: the same reference as an HTML page for people. */
export function renderDocsPage(origin: string, docs: RouteDoc[]): string {
  const rows = docs
    .map((doc) => {
      const bodies = doc.bodies
        .filter((fields) => fields.length > 0)
        .map((fields) => `<ul>${fields.map((field) => `<li><code>${escapeHtml(fieldLine(field))}</code>${field.description ? ` — ${escapeHtml(field.description)}` : ''}</li>`).join('')}</ul>`)
        .join('');
      return `<tr id="${escapeHtml(doc.method.toLowerCase() + doc.path.replaceAll('/', '-'))}"><td><code>${doc.method} ${escapeHtml(doc.path)}</code></td><td>${doc.access === 'public' ? 'none' : 'Bearer token'}</td><td>${escapeHtml(doc.summary)}${bodies}</td></tr>`;
    })
    .join('\n');
  return page(
    'Memory hive reference',
    `<h1>Memory hive reference</h1>
<p>Server: <code>${escapeHtml(origin)}</code>. Every API route is POST with a JSON body unless it says GET. Send <code>Authorization: Bearer &lt;token&gt;</code> where the table says so.
Errors are <code>{"error": "&lt;message&gt;"}</code>: 400 a body that does not parse, 401 no credential, 403 a credential without the grant, 404 nothing there, 409 a guard refusing.
A node is named by its id (<code>nd_…</code>) or its path of names (<code>acme/backend</code>). Agents: <a href="/llms.txt">/llms.txt</a>.</p>
<table><thead><tr><th>route</th><th>credential</th><th>what it does, and its body</th></tr></thead><tbody>
${rows}
</tbody></table>`,
  );
}

/** GET /v1/device: where a person admitting a device types its code (an admin's token approves it). */
export function renderDevicePage(): string {
  return page(
    'Approve a device',
    `<h1>Approve a device</h1>
<p>Someone signing in with the hive's client was shown a code such as <code>BCDF-GHJK</code>. An admin of the node they should reach types it here with their address, the node and the role, and approves with their own token.</p>
<form id="approve">
<label>Code <input name="code" required autocomplete="off" autocapitalize="characters" pattern="[A-Za-z]{4}-?[A-Za-z]{4}"></label>
<label>Their email <input name="email" type="email" required></label>
<label>Node <input name="node" required placeholder="acme/backend"></label>
<label>Role <select name="role"><option>reader</option><option selected>member</option><option>admin</option><option>owner</option></select></label>
<label>Your token <input name="token" type="password" required autocomplete="off"></label>
<button type="submit">Approve</button>
</form>
<p id="result" role="status"></p>
<script>
document.getElementById('approve').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const body = { code: form.get('code'), email: form.get('email'), node: form.get('node'), role: form.get('role') };
  const response = await fetch('/v1/device/approve', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + form.get('token') }, body: JSON.stringify(body) });
  const answer = await response.json();
  document.getElementById('result').textContent = response.ok ? 'Approved: ' + answer.person.email + ' may now finish signing in.' : answer.error;
});
</script>`,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}table{border-collapse:collapse;width:100%}td,th{border-top:1px solid #ddd;padding:.4rem;text-align:left;vertical-align:top}label{display:block;margin:.5rem 0}ul{margin:.2rem 0}</style>
</head><body>
${body}
</body></html>
`;
}
