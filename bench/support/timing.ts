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

/** Runs `work(i)` for each i below `count`, `concurrency` at a time: each one's time (ms, sorted) and the wall time (s). */
export async function timedAtATime(count: number, concurrency: number, work: (i: number) => Promise<void>): Promise<{ sorted: number[]; wallSeconds: number }> {
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        const begin = performance.now();
        await work(i);
        times.push(performance.now() - begin);
      }
    }),
  );
  return { sorted: times.sort((a, b) => a - b), wallSeconds: (performance.now() - started) / 1000 };
}
