import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { percentEncode, RawJson, type Mutation } from './mutations.js';
import type { Operation, RequestParts } from './operations.js';

/**
 * Requests as bytes on a socket of their own. fetch and http.request refuse to send what the
 * fuzzer must send (a NUL in a header, a lone surrogate in a path, a Content-Length the body does
 * not have), so every case is written by hand and read back with Connection: close.
 */
export interface WireRequest {
  method: string;
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** A Content-Length other than the body's own (a client that lies about what follows). */
  declaredLength?: number;
}

export type WireResponse =
  | { kind: 'answered'; status: number; headers: Record<string, string>; body: Buffer }
  | { kind: 'timeout' }
  | { kind: 'closed'; error?: string };

/** What of a response body is kept: error bodies are small, and a long run must not hold every answer. */
const KEPT_BODY_BYTES = 256 * 1024;

export function send(baseUrl: string, request: WireRequest, timeoutMs: number): Promise<WireResponse> {
  const url = new URL(baseUrl);
  const body = request.body ?? Buffer.alloc(0);
  const lines = [`${request.method.toUpperCase()} ${request.target} HTTP/1.1`, `Host: ${url.host}`, 'Connection: close'];
  for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
  if (request.declaredLength !== undefined) lines.push(`Content-Length: ${request.declaredLength}`);
  else if (body.length > 0 || request.method !== 'get') lines.push(`Content-Length: ${body.length}`);
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'utf8');

  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const socket = net.connect(Number(url.port), url.hostname);
    const finish = (outcome: WireResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish(parseResponse(Buffer.concat(chunks)) ?? { kind: 'timeout' }), timeoutMs);
    socket.on('connect', () => {
      socket.write(head);
      // The server may answer (413) and close before the body is written; a write error then is its right.
      if (body.length) socket.write(body, () => undefined);
    });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received <= KEPT_BODY_BYTES) chunks.push(chunk);
    });
    socket.on('end', () => finish(parseResponse(Buffer.concat(chunks)) ?? { kind: 'closed' }));
    socket.on('error', (error: NodeJS.ErrnoException) => finish(parseResponse(Buffer.concat(chunks)) ?? { kind: 'closed', error: error.code ?? error.message }));
  });
}

function parseResponse(bytes: Buffer): WireResponse | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const [statusLine, ...headerLines] = bytes.subarray(0, headEnd).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1]);
  if (!status) return undefined;
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const raw = bytes.subarray(headEnd + 4);
  // A header value holding CR LF CR LF ends the request early and the rest reads as a second one: its answer follows the first's.
  const length = Number(headers['content-length']);
  const body = headers['transfer-encoding']?.includes('chunked') ? dechunk(raw) : Number.isInteger(length) ? raw.subarray(0, length) : raw;
  return { kind: 'answered', status, headers, body };
}

function dechunk(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset < raw.length) {
    const lineEnd = raw.indexOf('\r\n', offset);
    if (lineEnd < 0) break;
    const size = parseInt(raw.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!size) break;
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/** JSON text of a value that may hold RawJson pieces (numbers past a double, nesting past JSON.stringify's stack). */
export function jsonText(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, inner: unknown) => {
    if (!(inner instanceof RawJson)) return inner;
    raws.push(inner.text);
    return `\u0000raw${raws.length - 1}\u0000`;
  });
  return text === undefined ? '' : text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_match, index: string) => raws[Number(index)]!);
}

const BOUNDARY = 'fuzz-boundary-7MA4YWxkTrZu0gW';

/** A multipart form of the fields, with the schema's binary property sent as the file part. */
function multipartBody(fields: Record<string, unknown>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    const isFile = name === 'file';
    const disposition = `Content-Disposition: form-data; name="${name}"${isFile ? '; filename="fuzz.jsonl"' : ''}`;
    const type = isFile ? '\r\nContent-Type: application/octet-stream' : '';
    const text = typeof value === 'string' ? value : value instanceof RawJson ? value.text : jsonText(value);
    parts.push(Buffer.from(`--${BOUNDARY}\r\n${disposition}${type}\r\n\r\n`), Buffer.from(text, 'utf8'), Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(parts);
}

/** A query string; repeated keys for arrays, as a browser's form would send them. */
function queryString(query: Record<string, unknown>): string {
  const pairs: string[] = [];
  for (const [name, value] of Object.entries(query)) {
    const values = Array.isArray(value) ? value.slice(0, 200) : [value];
    for (const item of values) {
      const text = typeof item === 'string' ? item : item instanceof RawJson ? item.text : typeof item === 'object' && item !== null ? jsonText(item) : String(item);
      pairs.push(`${percentEncode(name)}=${percentEncode(text)}`);
    }
  }
  return pairs.length ? `?${pairs.join('&')}` : '';
}

/** Sets `value` at `path` inside a copy of `body`, making the containers on the way. */
export function withValueAt(body: unknown, path: ReadonlyArray<string | number>, value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  const container: any = Array.isArray(body) ? [...body] : body && typeof body === 'object' ? { ...body } : typeof head === 'number' ? [] : {};
  // A real own property even for "__proto__", as JSON.parse would make it.
  Object.defineProperty(container, head!, { value: withValueAt(container[head!], rest, value), enumerable: true, writable: true, configurable: true });
  return container;
}

const NOT_GZIP = Buffer.from('this is not compressed at all');

let bomb: Buffer | undefined;
/** About 80 KB on the wire, 80 MB once inflated (past the gateway's 64 MB limit): the limit must apply to what the body becomes. */
const gzipBomb = () => (bomb ??= gzipSync(Buffer.alloc(80 * 1024 * 1024, 0x20)));

/** The request of a case: the base parts with the one mutation applied, then encoded as the route expects. */
export function encodeRequest(operation: Operation, base: RequestParts, credentialHeader: string | undefined, mutation?: Mutation): WireRequest {
  const parts: RequestParts = { pathSegments: { ...base.pathSegments }, query: { ...base.query }, headers: { ...base.headers }, body: base.body };
  if (credentialHeader) parts.headers.authorization = credentialHeader;
  switch (mutation?.kind) {
    case 'path':
      parts.pathSegments[mutation.name] = String(mutation.hazard.value);
      break;
    case 'query':
      parts.query[mutation.name] = mutation.hazard.value;
      break;
    case 'header':
      parts.headers[mutation.name] = String(mutation.hazard.value);
      break;
    case 'field':
      parts.body = withValueAt(parts.body, mutation.path, mutation.hazard.value);
      break;
  }
  const target = operation.path.replace(/\{(\w+)\}/g, (_match, name: string) => parts.pathSegments[name] ?? 'missing') + queryString(parts.query);
  const headers = Object.entries(parts.headers);
  let body: Buffer | undefined;
  if (operation.body?.kind === 'multipart') {
    body = multipartBody((parts.body ?? {}) as Record<string, unknown>);
    headers.push(['Content-Type', `multipart/form-data; boundary=${BOUNDARY}`]);
  } else if (operation.body) {
    body = Buffer.from(jsonText(parts.body), 'utf8');
    headers.push(['Content-Type', 'application/json']);
  }
  const request: WireRequest = { method: operation.method, target, headers, body };
  return mutation?.kind === 'body' ? withBodyFault(request, mutation.fault) : request;
}

function withBodyFault(request: WireRequest, fault: Extract<Mutation, { kind: 'body' }>['fault']): WireRequest {
  const body = request.body ?? Buffer.from('{}');
  const setHeader = (name: string, value: string) => [...request.headers.filter(([existing]) => existing.toLowerCase() !== name.toLowerCase()), [name, value] as [string, string]];
  const withJsonType = () => (request.headers.some(([name]) => name.toLowerCase() === 'content-type') ? request.headers : setHeader('Content-Type', 'application/json'));
  switch (fault.label) {
    case 'truncated':
      return { ...request, headers: withJsonType(), body: body.subarray(0, Math.floor(body.length * fault.keepFraction)) };
    case 'content-type':
      return { ...request, headers: fault.contentType ? setHeader('Content-Type', fault.contentType) : request.headers.filter(([name]) => name.toLowerCase() !== 'content-type'), body };
    case 'content-encoding': {
      const bytes = {
        plain: body,
        garbage: NOT_GZIP,
        'truncated-gzip': gzipSync(body).subarray(0, 12),
        'gzip-bomb': gzipBomb(),
      }[fault.bytes];
      return { ...request, headers: [...withJsonType(), ['Content-Encoding', fault.encoding]], body: bytes };
    }
    case 'declared-length':
      return { ...request, headers: withJsonType(), body: body.subarray(0, 16), declaredLength: fault.declared };
    case 'not-an-object':
      return { ...request, headers: withJsonType(), body: Buffer.from(fault.text) };
    case 'invalid-utf8': {
      const text = body.toString('utf8');
      const quote = text.indexOf('"');
      const spoiled = quote >= 0 ? Buffer.concat([body.subarray(0, quote + 1), Buffer.from([0xff, 0xfe, 0xc0, 0xaf]), body.subarray(quote + 1)]) : Buffer.concat([body, Buffer.from([0xff])]);
      return { ...request, headers: withJsonType(), body: spoiled };
    }
    case 'byte-order-mark':
      return { ...request, headers: withJsonType(), body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]) };
  }
}
