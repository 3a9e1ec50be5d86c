import type { Request, RequestHandler, Response } from 'express';

/**
 * What the server-rendered dashboards (the gateway's and the hive's) share: the HTML template, the
 * cookie reader and the Origin check of browser writes. `html` is a tagged template that escapes every value it is given unless that value is markup
 * `html` itself produced (or a list of such), so a key name, an address or a memory's title can
 * never become markup.
 */
const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (char) => ENTITIES[char]!);
}

/** Markup made by `html` (or a constant of a page module); the only thing inserted unescaped. */
export class SafeHtml {
  constructor(readonly markup: string) {}
  toString(): string {
    return this.markup;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  return new SafeHtml(strings.reduce((out, text, index) => out + renderValue(values[index - 1]) + text));
}

function renderValue(value: unknown): string {
  if (value instanceof SafeHtml) return value.markup;
  if (Array.isArray(value)) return value.map(renderValue).join('');
  if (value === undefined || value === null || value === false) return '';
  return escapeHtml(value);
}

/** One cookie of the request, as sent (the dashboards' values are URL-safe tokens). */
export function readCookie(req: Request, name: string): string | undefined {
  for (const pair of (req.get('cookie') ?? '').split(';')) {
    const separator = pair.indexOf('=');
    if (separator > 0 && pair.slice(0, separator).trim() === name) return pair.slice(separator + 1).trim();
  }
  return undefined;
}

export function sendPage(res: Response, status: number, page: string | SafeHtml): void {
  res.status(status).type('html').send(String(page));
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The CSRF guard of every browser write: the Origin header must name this server as the request
 * reached it, or `publicBaseUrl` (the address behind a proxy). A missing Origin is refused too:
 * every browser sends one on a form post, so only something that is not a browser omits it.
 * `refusal` is the caller's error, in its own envelope.
 */
export function sameOriginWrites(publicBaseUrl: string | undefined, refusal: () => Error): RequestHandler {
  const configured = publicBaseUrl === undefined ? undefined : originOf(publicBaseUrl);
  return (req, _res, next) => {
    if (SAFE_METHODS.has(req.method)) return next();
    const origin = req.get('origin');
    if (origin === undefined || (origin !== originOf(`${req.protocol}://${req.get('host') ?? ''}`) && origin !== configured)) throw refusal();
    next();
  };
}

/** Serialized as browsers send Origin (lowercase host, no default port); undefined when not a URL. */
export function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}
