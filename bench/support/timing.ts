import { quantile } from './corpus.js';

/** How long `work` took, in milliseconds, and what it returned. */
export async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; result: T }> {
  const started = performance.now();
  const result = await work();
  return { ms: performance.now() - started, result };
}

/** Runs `run` over the queries one after another and returns the p50, p95 and p99 of their times (ms), and each time in query order. */
export async function latencies(queries: { text: string }[], run: (text: string) => Promise<unknown>) {
  const times: number[] = [];
  for (const query of queries) times.push((await timed(() => run(query.text))).ms);
  const sorted = [...times].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95), p99: quantile(sorted, 0.99), times };
}
