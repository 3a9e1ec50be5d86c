/**
 * Where the slowest requests of an open-loop run spent their time. The Go generator (with
 * `-trace`) sends each request with X-Request-Id lg-<scheduled send, Unix µs> and writes its send
 * lag and latency; the API process (recordRequestTimes) writes when each of those requests reached
 * its JavaScript and when its response was finished, and when each garbage collection paused it.
 * Both use the wall clock, so each slow request splits into: the generator sending late, the way
 * to the API's request handler (the kernel, the API's process waiting for a core or its event
 * loop busy with earlier work), the API's own handling, and the way back to the generator.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const TRACED_ID = /^lg-(\d+)$/;

const wallMicros = (sinceOrigin: number) => Math.round((performance.timeOrigin + sinceOrigin) * 1000);

/** In the API process: keeps the times of traced requests and of collections, and writes them to `file` on `flush()`. */
export function recordRequestTimes(server: Server, file: string): { flush(): void } {
  const lines: string[] = [];
  server.prependListener('request', (req, res) => {
    const id = req.headers['x-request-id'];
    if (typeof id !== 'string' || !TRACED_ID.test(id)) return;
    const reached = wallMicros(performance.now());
    res.once('finish', () => lines.push(`request ${id} ${reached} ${wallMicros(performance.now())}`));
  });
  const collections = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) lines.push(`gc ${wallMicros(entry.startTime)} ${Math.round(entry.duration * 1000)}`);
  });
  collections.observe({ entryTypes: ['gc'] });
  return {
    flush() {
      collections.disconnect();
      writeFileSync(file, lines.join('\n') + '\n');
    },
  };
}

/** The parts of a traced request's latency, in the order they happen. */
export const PARTS = ['lateSend', 'toApi', 'insideApi', 'back'] as const;
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
  const seenByApi = new Map<string, { reached: number; finished: number }>();
  const pauses: { start: number; end: number }[] = [];
  for (const line of readFileSync(apiFile, 'utf8').split('\n')) {
    const [kind, a, b, c] = line.split(' ');
    if (kind === 'request') seenByApi.set(a!, { reached: Number(b), finished: Number(c) });
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
        insideApi: (api.finished - api.reached) / 1000,
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
