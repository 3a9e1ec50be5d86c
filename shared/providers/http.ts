import { getGlobalDispatcher, type Dispatcher } from 'undici';
import { UpstreamError } from './types.js';

/**
 * What every HTTP adapter shares: one fetch wrapper that turns every upstream failure into an
 * UpstreamError (so no adapter keeps its own ladder of catches), and one server-sent-events reader.
 */

export interface ServerSentEvent {
  event: string | undefined;
  data: string;
}

/**
 * Reads a `text/event-stream` body into events, per the WHATWG SSE parsing rules that matter to
 * API streams: lines end in \n, \r\n or \r; `data:` lines accumulate joined by \n; `:` lines are
 * comments; a blank line dispatches; a final event without a trailing blank line is still yielded.
 * Events without any data line (e.g. a bare `event:` or a lone `id:`) are skipped, as browsers do.
 */
export async function* readServerSentEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event: string | undefined;
  let data: string[] = [];
  let hasData = false;

  function* takeLine(line: string): Generator<ServerSentEvent> {
    if (line === '') {
      if (hasData) yield { event, data: data.join('\n') };
      event = undefined;
      data = [];
      hasData = false;
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') {
      data.push(value);
      hasData = true;
    }
  }

  // Leaving the loop early (break, throw, abort) ends the iteration, which stops the upstream body.
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    yield* takeLines(false);
  }
  buffer += decoder.decode();
  yield* takeLines(true);
  if (buffer !== '') yield* takeLine(buffer);
  yield* takeLine('');

  function* takeLines(done: boolean): Generator<ServerSentEvent> {
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffer);
      if (!match) return;
      // A trailing \r may be the first half of \r\n; keep it until more arrives (or the end).
      if (match[0] === '\r' && match.index === buffer.length - 1 && !done) return;
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      yield* takeLine(line);
    }
  }
}

/** The message in a provider's error body, whichever of the common shapes it uses. */
export function errorMessageFromBody(text: string, fallback: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text.trim().slice(0, 500) || fallback;
  }
  const body = parsed as Record<string, unknown> | null;
  if (body && typeof body === 'object') {
    const error = body.error as Record<string, unknown> | string | undefined;
    if (typeof error === 'string' && error) return error;
    if (error && typeof error === 'object' && typeof error.message === 'string') return error.message;
    if (typeof body.message === 'string' && body.message) return body.message;
    if (Array.isArray(body.errors) && typeof (body.errors[0] as { message?: unknown })?.message === 'string') {
      return (body.errors[0] as { message: string }).message;
    }
    if (typeof body.detail === 'string' && body.detail) return body.detail;
  }
  return fallback;
}

export interface UpstreamFetchOptions {
  /**
   * For a provider that words a failure with an unusual status (Gemini answers a wrong API key
   * with 400 API_KEY_INVALID): the status the gateway should see, given the error body.
   */
  statusOfError?: (status: number, body: string) => number | undefined;
}

/** What an adapter sends: every provider call is a request with a body (JSON, a form, multipart). */
export interface UpstreamRequest {
  method: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: string | Buffer | FormData;
  signal: AbortSignal;
}

/** A 2xx answer: its status, headers, and body, read once as text, bytes or a stream of chunks. */
export interface UpstreamResponse {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
  body: AsyncIterable<Uint8Array>;
}

/**
 * The one HTTP call of every adapter, made with undici's request API rather than fetch: fetch wraps
 * every call in WHATWG Request, Headers, Response and stream objects, which cost a gateway that
 * makes thousands of calls a second more CPU than the call itself. It goes through the process's
 * global undici dispatcher, the keep-alive connection pool fetch uses too. A non-2xx answer
 * becomes `UpstreamError.fromStatus` (with the provider's own message and Retry-After); a network
 * failure becomes a retryable UpstreamError without a status; an abort is rethrown unchanged so
 * the caller sees its own cancellation.
 */
export async function upstreamFetch(provider: string, url: string, init: UpstreamRequest, options: UpstreamFetchOptions = {}): Promise<UpstreamResponse> {
  let headers = init.headers;
  let body = init.body;
  if (body instanceof FormData) {
    // Multipart (a transcription's audio): encoded by the platform's own FormData serializer.
    const encoded = new Response(body);
    headers = { ...headers, 'content-type': encoded.headers.get('content-type')! };
    body = Buffer.from(await encoded.arrayBuffer());
  }
  let answer: Dispatcher.ResponseData;
  try {
    // The dispatcher's own request() rather than undici's top-level one, which copies the options
    // with `{ ...opts, origin, path, method }`: on this V8 such a copy outlived young-generation
    // collections, and with it, through the signal, the whole call (README, "The 500/s tail").
    const target = new URL(url);
    answer = await getGlobalDispatcher().request({ origin: target.origin, path: `${target.pathname}${target.search}`, method: init.method, headers, body, signal: init.signal });
  } catch (error) {
    throw networkFailure(provider, error, init.signal);
  }
  const responseHeaders = { get: (name: string) => headerValue(answer.headers[name.toLowerCase()]) };
  if (answer.statusCode < 200 || answer.statusCode > 299) {
    let text = '';
    try {
      text = await answer.body.text();
    } catch (error) {
      throw networkFailure(provider, error, init.signal);
    }
    const status = options.statusOfError?.(answer.statusCode, text) ?? answer.statusCode;
    throw UpstreamError.fromStatus(provider, status, errorMessageFromBody(text, `HTTP ${answer.statusCode}`), responseHeaders.get('retry-after'));
  }
  return {
    status: answer.statusCode,
    headers: responseHeaders,
    text: () => answer.body.text(),
    arrayBuffer: () => answer.body.arrayBuffer(),
    body: answer.body,
  };
}

function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * Maps a failure while reading or fetching: the caller's abort passes through as is; anything
 * else (reset connection, truncated body) is a retryable upstream failure.
 */
export function networkFailure(provider: string, error: unknown, signal: AbortSignal): unknown {
  if (signal.aborted) return error;
  if (error instanceof UpstreamError) return error;
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
  const message = error instanceof Error ? `${error.message}${cause}` : String(error);
  return new UpstreamError(provider, undefined, message, true);
}

/** Reads a JSON body, mapping a broken connection mid-body like any other network failure. */
export async function readJson<T>(provider: string, response: UpstreamResponse, signal: AbortSignal): Promise<T> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw networkFailure(provider, error, signal);
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError(provider, response.status, `invalid JSON in response: ${text.slice(0, 200)}`, true);
  }
}

/**
 * Server-sent events of a streaming response, with a connection that breaks mid-stream turned
 * into a retryable UpstreamError (so a cut stream never looks like a finished one).
 */
export async function* upstreamEvents(provider: string, response: UpstreamResponse, signal: AbortSignal): AsyncGenerator<ServerSentEvent> {
  try {
    yield* readServerSentEvents(response.body);
  } catch (error) {
    throw networkFailure(provider, error, signal);
  }
}

/** One stream event's JSON payload; a garbled event is a retryable upstream failure. */
export function parseEventJson(provider: string, data: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(data);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Falls through to the error below.
  }
  throw new UpstreamError(provider, undefined, `invalid JSON in stream event: ${data.slice(0, 200)}`, true);
}

/** A `data:` URL's media type and base64 payload (plain-text payloads are base64-encoded). */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/s.exec(url);
  if (!match) return undefined;
  const mediaType = match[1] || 'text/plain';
  const isBase64 = match[2]!.split(';').includes('base64');
  return { mediaType, data: isBase64 ? match[3]! : Buffer.from(decodeURIComponent(match[3]!)).toString('base64') };
}
