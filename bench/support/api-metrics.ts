/**
 * What the API's own /metrics say about a measured run: how late its event loop ran, how long
 * garbage collection paused it, and how long its metered calls waited in each governance step.
 * prom-client's event-loop histogram (perf_hooks.monitorEventLoopDelay) restarts at every scrape
 * and the other histograms only grow, so a scrape before the run and one after it give the run's
 * own figures. A latency tail the event loop also shows was spent inside the API process; one the
 * reserve or settle step shows was spent waiting on PostgreSQL, and the upstream step the provider.
 */
export interface ApiRunFigures {
  /** How late the loop's timers ran beyond their interval, p99 and max. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** Collections during the run, of every kind, and their summed pause. */
  gcCount: number;
  gcPauseMs: number;
  /**
   * The whole request inside the API (`request`) and each metering step (rate_limit, reserve, upstream,
   * settle): mean, and the histogram bucket p99 falls in.
   */
  steps: Record<string, { meanMs: number; p99AtMostMs: number }>;
}

/**
 * prom-client's default sampling interval. The histogram records each whole interval between
 * samples (an idle loop reads 10.1 ms), so the lateness is what exceeds it.
 */
const MONITOR_RESOLUTION_MS = 10;

export async function watchApiMetrics(origin: string): Promise<() => Promise<ApiRunFigures | undefined>> {
  const before = await scrape(origin);
  return async () => {
    const after = await scrape(origin);
    const p99 = after.get('nodejs_eventloop_lag_p99_seconds');
    const max = after.get('nodejs_eventloop_lag_max_seconds');
    if (p99 === undefined || max === undefined) return undefined;
    // Summed over every label set whose labels contain `labels`, the growth during the run.
    const grown = (metric: string, labels = '') => total(after, metric, labels) - total(before, metric, labels);
    // A histogram's growth during the run, over the samples whose labels contain `label`: mean, and
    // the bucket p99 falls in (the cumulative buckets, smallest first: the first that holds 99 %).
    const histogram = (metric: string, label: string) => {
      const count = grown(`${metric}_count`, label);
      if (count === 0) return undefined;
      // Several label sets (routes, statuses) may match: their buckets add up by bound.
      const callsByBound = new Map<number, number>();
      for (const sample of after.keys()) {
        if (!sample.startsWith(`${metric}_bucket{`) || !sample.includes(label)) continue;
        const bound = /le="([^"]+)"/.exec(sample)?.[1];
        const le = bound === '+Inf' ? Number.POSITIVE_INFINITY : Number(bound);
        callsByBound.set(le, (callsByBound.get(le) ?? 0) + after.get(sample)! - (before.get(sample) ?? 0));
      }
      const buckets = [...callsByBound].map(([le, calls]) => ({ le, calls })).sort((a, b) => a.le - b.le);
      const p99Bucket = buckets.find((bucket) => bucket.calls >= 0.99 * count);
      return { meanMs: (grown(`${metric}_sum`, label) * 1000) / count, p99AtMostMs: (p99Bucket?.le ?? Number.POSITIVE_INFINITY) * 1000 };
    };
    const steps: ApiRunFigures['steps'] = {};
    // The whole of each request inside the API, from its first middleware to the response's end:
    // the measured runs send nothing but POSTs.
    const request = histogram('http_request_duration_seconds', 'method="POST"');
    if (request) steps.request = request;
    for (const step of ['rate_limit', 'reserve', 'upstream', 'settle']) {
      const figures = histogram('svc_metering_step_seconds', `step="${step}"`);
      if (figures) steps[step] = figures;
    }
    return {
      loopDelayP99Ms: p99 * 1000 - MONITOR_RESOLUTION_MS,
      loopDelayMaxMs: max * 1000 - MONITOR_RESOLUTION_MS,
      gcCount: grown('nodejs_gc_duration_seconds_count'),
      gcPauseMs: grown('nodejs_gc_duration_seconds_sum') * 1000,
      steps,
    };
  };
}

/** The API's samples in Prometheus' text format, by metric name and labels as printed (`name{a="b"}`). */
async function scrape(origin: string): Promise<Map<string, number>> {
  const response = await fetch(`${origin}/metrics`);
  const text = response.ok ? await response.text() : '';
  return new Map([...text.matchAll(/^([a-z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/gim)].map((match) => [match[1]!, Number(match[2])]));
}

function total(samples: Map<string, number>, metric: string, labels: string): number {
  let sum = 0;
  for (const [sample, value] of samples) if ((sample === metric || sample.startsWith(`${metric}{`)) && sample.includes(labels)) sum += value;
  return sum;
}
