import { Histogram, Registry } from 'prom-client';

/**
 * How long each step of a metered call waited, as a Prometheus histogram beside the HTTP metrics:
 * the rate-limit round trip to Redis, the reservation and the settlement (in PostgreSQL, or in
 * this process's memory for a call on a quota grant), and between them the upstream work (the
 * provider call, retries and cascade included; a streamed chat settles on its own path and is not
 * timed here). A slow call's time then shows where it went: in the API itself (http latency less
 * these), in Redis, queued behind other metering statements, or at the provider.
 */
export type MeteringStep = 'rate_limit' | 'reserve' | 'upstream' | 'settle';

export class MeteringTimings {
  readonly registry = new Registry();
  private readonly seconds = new Histogram({
    name: 'svc_metering_step_seconds',
    help: 'Time a metered call spent in each step: rate_limit (Redis), reserve and settle (PostgreSQL, or memory on a quota grant), upstream (the provider call of a non-streamed call)',
    labelNames: ['step'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  /**
   * Returns `work` itself, recording how long it took to settle (a failed step too). Four steps
   * of every metered call pass here, so it adds one reaction to the promise and nothing else: no
   * wrapping async function, and the label objects are made once.
   */
  time<T>(step: MeteringStep, work: Promise<T>): Promise<T> {
    const started = performance.now();
    const record = () => this.seconds.observe(STEP_LABELS[step], (performance.now() - started) / 1_000);
    work.then(record, record);
    return work;
  }
}

const STEP_LABELS: Record<MeteringStep, { step: MeteringStep }> = {
  rate_limit: { step: 'rate_limit' },
  reserve: { step: 'reserve' },
  upstream: { step: 'upstream' },
  settle: { step: 'settle' },
};
