/**
 * What the API's own /metrics say about a measured run: how late its event loop ran, how long
 * garbage collection paused it, and how long its metered calls waited in each governance step.
 * prom-client's event-loop histogram (perf_hooks.monitorEventLoopDelay) restarts at every scrape
 * and the other histograms only grow, so a scrape before the run and one after it give the run's
 * own figures. A latency tail the event loop also shows was spent inside the API process; one the
 * reserve or settle step shows was spent waiting on PostgreSQL.
 */
export interface ApiRunFigures {
  /** How late the loop's timers ran beyond their interval, p99 and max. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** Collections during the run, of every kind, and their summed pause. */
  gcCount: number;
  gcPauseMs: number;
  /** Per governance step (rate_limit, reserve, settle): mean, and the histogram bucket p99 falls in. */
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
    const p99 = samples(after, 'nodejs_eventloop_lag_p99_seconds')[0]?.value;
    const max = samples(after, 'nodejs_eventloop_lag_max_seconds')[0]?.value;
    if (p99 === undefined || max === undefined) return undefined;
    const grown = (metric: string, labels = '') => total(samples(after, metric, labels)) - total(samples(before, metric, labels));
    const steps: ApiRunFigures['steps'] = {};
    for (const step of ['rate_limit', 'reserve', 'settle']) {
      const label = `step="${step}"`;
      const count = grown('svc_metering_step_seconds_count', label);
      if (count === 0) continue;
      // The cumulative buckets, smallest first: p99 lies in the first that holds 99 % of the calls.
      const buckets = samples(after, 'svc_metering_step_seconds_bucket', label).map((bucket) => ({
        le: Number(/le="([^"]+)"/.exec(bucket.labels)?.[1]),
        calls: bucket.value - (samples(before, 'svc_metering_step_seconds_bucket', bucket.labels)[0]?.value ?? 0),
      }));
      const p99Bucket = buckets.find((bucket) => bucket.calls >= 0.99 * count);
      steps[step] = { meanMs: (grown('svc_metering_step_seconds_sum', label) * 1000) / count, p99AtMostMs: (p99Bucket?.le ?? Number.POSITIVE_INFINITY) * 1000 };
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

async function scrape(origin: string): Promise<string> {
  const response = await fetch(`${origin}/metrics`);
  return response.ok ? response.text() : '';
}

/** The samples of a metric in Prometheus' text format whose labels contain `labels`. */
function samples(text: string, metric: string, labels = ''): Array<{ labels: string; value: number }> {
  return [...text.matchAll(new RegExp(`^${metric}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))]
    .map((match) => ({ labels: match[1] ?? '', value: Number(match[2]) }))
    .filter((sample) => sample.labels.includes(labels));
}

function total(values: Array<{ value: number }>): number {
  return values.reduce((sum, sample) => sum + sample.value, 0);
}
