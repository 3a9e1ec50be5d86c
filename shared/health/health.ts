import proto from '@temporalio/proto';
import type { GatewayServices } from '../composition/gateway.js';

/**
 * Reachability of every backing service, and whether any worker is polling the platform's
 * task queue. Each check has its own deadline so one slow dependency cannot hide the others.
 */
export interface ComponentHealth {
  ok: boolean;
  latency_ms: number;
  error?: string;
}

export interface HealthReport {
  /** ok: all green; degraded: Temporal or the worker away (calls serve, long work waits); unavailable: PostgreSQL or Redis away. */
  status: 'ok' | 'degraded' | 'unavailable';
  checks: {
    postgres: ComponentHealth;
    redis: ComponentHealth;
    temporal: ComponentHealth & { address: string; namespace: string; web_ui: string };
    worker: ComponentHealth & { task_queue: string; pollers: number };
  };
}

const CHECK_TIMEOUT_MS = 2_000;
/** Pollers hold a long poll of up to a minute; one seen within this window is alive. */
const POLLER_FRESH_MS = 90_000;
const { TaskQueueKind, TaskQueueType } = proto.temporal.api.enums.v1;

export async function checkHealth(platform: GatewayServices): Promise<HealthReport> {
  const { config } = platform;
  const [postgres, redis, temporalCheck, worker] = await Promise.all([
    timed(async () => {
      await platform.db.query('SELECT 1');
    }),
    timed(async () => {
      await platform.redis.ping();
    }),
    timed(async (signal) => {
      await platform.temporal.probe.withAbortSignal(signal, () => platform.temporal.probe.workflowService.getSystemInfo({}));
    }),
    timedWithValue((signal) => countLivePollers(platform, signal)),
  ]);

  const pollers = worker.value ?? 0;
  const workerHealth = {
    ...worker.health,
    ok: worker.health.ok && pollers > 0,
    ...(worker.health.ok && pollers === 0 && { error: 'no worker is polling the task queue' }),
  };
  const checks: HealthReport['checks'] = {
    postgres,
    redis,
    temporal: { ...temporalCheck, address: config.temporalAddress, namespace: config.TEMPORAL_NAMESPACE, web_ui: config.temporalUiUrl },
    worker: { ...workerHealth, task_queue: config.TEMPORAL_TASK_QUEUE, pollers },
  };
  const allOk = Object.values(checks).every((check) => check.ok);
  return { status: !postgres.ok || !redis.ok ? 'unavailable' : allOk ? 'ok' : 'degraded', checks };
}

async function countLivePollers(platform: GatewayServices, signal: AbortSignal): Promise<number> {
  const connection = platform.temporal.probe;
  const response = await connection.withAbortSignal(signal, () =>
    connection.workflowService.describeTaskQueue({
      namespace: platform.config.TEMPORAL_NAMESPACE,
      taskQueue: { name: platform.config.TEMPORAL_TASK_QUEUE, kind: TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    }),
  );
  const freshAfter = Date.now() - POLLER_FRESH_MS;
  return (response.pollers ?? []).filter((poller) => {
    const seconds = Number(poller.lastAccessTime?.seconds ?? 0);
    return seconds * 1000 >= freshAfter;
  }).length;
}

async function timed(check: (signal: AbortSignal) => Promise<unknown>): Promise<ComponentHealth> {
  return (await timedWithValue(check)).health;
}

/**
 * Runs one check with a deadline. The check is aborted when the deadline passes or it settles,
 * so no retry of a client library (Temporal's gRPC retries) outlives the request that asked.
 */
async function timedWithValue<T>(check: (signal: AbortSignal) => Promise<T>): Promise<{ health: ComponentHealth; value?: T }> {
  const started = performance.now();
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  try {
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
    });
    const value = await Promise.race([check(controller.signal), deadline]);
    return { health: { ok: true, latency_ms: elapsed(started) }, value };
  } catch (error) {
    return { health: { ok: false, latency_ms: elapsed(started), error: error instanceof Error ? error.message : String(error) } };
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

const elapsed = (started: number) => Math.round((performance.now() - started) * 10) / 10;
