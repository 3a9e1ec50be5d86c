/**
 * Where the slowest requests of an open-loop run spent their time. The Go generator (with
 * `-trace`) sends each request with X-Request-Id lg-<scheduled send, Unix µs> and writes its send
 * lag and latency; the API process (recordRequestTimes) writes when each of those requests reached
 * its JavaScript and when its response was finished, and when each garbage collection paused it.
 * Both use the wall clock, so each slow request splits into: the generator sending late, the way
 * to the API's request handler (the kernel, the API's process waiting for a core or its event
 * loop busy with earlier work), the API's own handling, and the way back to the generator. A
 * gateway's upstream calls (undici's diagnostics channels, tied to the traced request through
 * its async context) split the API's part into its own work and the time upstream.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const TRACED_ID = /^lg-(\d+)$/;

/** What undici publishes on its request channels: the request object, one per upstream call. */
interface UndiciMessage {
  request: object;
}

const wallMicros = (sinceOrigin: number) => Math.round((performance.timeOrigin + sinceOrigin) * 1000);

/** In the API process: keeps the times of traced requests and of collections, and writes them to `file` on `flush()`. */
export function recordRequestTimes(server: Server, file: string): { flush(): void } {
  const lines: string[] = [];
  // The traced request a piece of work belongs to, through its async context (undefined: untraced).
  const tracedRequest = new AsyncLocalStorage<{ upstreamMicros: number } | undefined>();
  server.prependListener('request', (req, res) => {
    const id = req.headers['x-request-id'];
    if (typeof id !== 'string' || !TRACED_ID.test(id)) {
      tracedRequest.enterWith(undefined);
      return;
    }
    const reached = wallMicros(performance.now());
    const traced = { upstreamMicros: 0 };
    tracedRequest.enterWith(traced);
    res.once('finish', () => lines.push(`request ${id} ${reached} ${wallMicros(performance.now())} ${traced.upstreamMicros}`));
  });
  // Each upstream call, from its creation to its body's end (or failure), retries included.
  const upstreamStarts = new WeakMap<object, { traced: { upstreamMicros: number }; started: number }>();
  const started = (message: unknown) => {
    const traced = tracedRequest.getStore();
    if (traced) upstreamStarts.set((message as UndiciMessage).request, { traced, started: performance.now() });
  };
  const ended = (message: unknown) => {
    const { request } = message as UndiciMessage;
    const call = upstreamStarts.get(request);
    if (!call) return;
    upstreamStarts.delete(request);
    call.traced.upstreamMicros += Math.round((performance.now() - call.started) * 1000);
  };
  const channels: Record<string, (message: unknown) => void> = { 'undici:request:create': started, 'undici:request:trailers': ended, 'undici:request:error': ended };
  for (const [name, listener] of Object.entries(channels)) diagnostics.subscribe(name, listener);
  const collections = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) lines.push(`gc ${wallMicros(entry.startTime)} ${Math.round(entry.duration * 1000)}`);
  });
  collections.observe({ entryTypes: ['gc'] });
  return {
    flush() {
      collections.disconnect();
      for (const [name, listener] of Object.entries(channels)) diagnostics.unsubscribe(name, listener);
      writeFileSync(file, lines.join('\n') + '\n');
    },
  };
}

/** The parts of a traced request's latency, in the order they happen (the upstream calls fall inside the API's part). */
export const PARTS = ['lateSend', 'toApi', 'insideApi', 'upstream', 'back'] as const;
export type Part = (typeof PARTS)[number];

export interface TailBreakdown {
  requests: number;
  /** Per part: its mean milliseconds, and the share of the requests in which it alone took more than 1 ms. */
  parts: Record<Part, { meanMs: number; over1ms: number }>;
  /** Share of the requests whose time overlapped a garbage-collection pause. */
  duringCollection: number;
}

/**
 * The breakdown of the requests at or above `quantile` (0.99: the slowest 1 %), and of all of
 * them for contrast; undefined when the traces hold no request both sides saw.
 */
export function tailBreakdown(generatorFile: string, apiFile: string, quantile: number): { slowest: TailBreakdown; all: TailBreakdown } | undefined {
  // The Node generator writes no trace, and an API that died writes none either.
  if (!existsSync(generatorFile) || !existsSync(apiFile)) return undefined;
  const seenByApi = new Map<string, { reached: number; finished: number; upstream: number }>();
  const pauses: { start: number; end: number }[] = [];
  for (const line of readFileSync(apiFile, 'utf8').split('\n')) {
    const [kind, a, b, c, d] = line.split(' ');
    if (kind === 'request') seenByApi.set(a!, { reached: Number(b), finished: Number(c), upstream: Number(d ?? 0) });
    else if (kind === 'gc') pauses.push({ start: Number(a), end: Number(a) + Number(b) });
  }
  const traced: { total: number; parts: Record<Part, number>; duringCollection: boolean }[] = [];
  for (const line of readFileSync(generatorFile, 'utf8').split('\n')) {
    const [id, lag, latency] = line.split(' ');
    const api = id === undefined ? undefined : seenByApi.get(id);
    if (!api) continue;
    const due = Number(TRACED_ID.exec(id!)![1]);
    const lateSend = Number(lag);
    const total = Number(latency);
    const returned = due + total * 1000;
    traced.push({
      total,
      parts: {
        lateSend,
        toApi: (api.reached - due) / 1000 - lateSend,
        insideApi: (api.finished - api.reached - api.upstream) / 1000,
        upstream: api.upstream / 1000,
        back: (returned - api.finished) / 1000,
      },
      duringCollection: pauses.some((pause) => pause.start < returned && pause.end > due),
    });
  }
  if (traced.length === 0) return undefined;
  traced.sort((x, y) => x.total - y.total);
  const summarize = (of: typeof traced): TailBreakdown => ({
    requests: of.length,
    parts: Object.fromEntries(
      PARTS.map((part) => [part, { meanMs: of.reduce((sum, request) => sum + request.parts[part], 0) / of.length, over1ms: of.filter((request) => request.parts[part] > 1).length / of.length }]),
    ) as TailBreakdown['parts'],
    duringCollection: of.filter((request) => request.duringCollection).length / of.length,
  });
  return { slowest: summarize(traced.slice(Math.floor(quantile * traced.length))), all: summarize(traced) };
}

/** Prints a breakdown (undefined: there was no trace); the upstream part only when the calls had one. */
export function printTailBreakdown(breakdown: ReturnType<typeof tailBreakdown>, calls: string): void {
  if (!breakdown) {
    console.log(`where the slowest ${calls} spent their time: no trace (only the Go load generator writes one)`);
    return;
  }
  const parts = PARTS.filter((part) => part !== 'upstream' || breakdown.all.parts.upstream.meanMs > 0);
  const row = (which: string, group: TailBreakdown) => ({
    calls: which,
    count: group.requests,
    ...Object.fromEntries(parts.map((part) => [`${PART_NAMES[part]} ms`, group.parts[part].meanMs.toFixed(2)])),
    ...Object.fromEntries(parts.map((part) => [`${PART_NAMES[part]} >1 ms`, percent(group.parts[part].over1ms)])),
    'during a collection': percent(group.duringCollection),
  });
  console.log(
    `where the ${calls} spent their time (means): the generator sending late, the way to the API's handler ` +
      `(the kernel, the API waiting for a core or for its event loop), the API's own handling${parts.includes('upstream') ? ', its calls upstream' : ''}, and the way back`,
  );
  console.table([row('slowest 1 %', breakdown.slowest), row('all', breakdown.all)]);
}

const PART_NAMES: Record<Part, string> = { lateSend: 'late send', toApi: 'to the API', insideApi: 'inside the API', upstream: 'upstream', back: 'back' };
const percent = (share: number) => `${(share * 100).toFixed(0)} %`;
