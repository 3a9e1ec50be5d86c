import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../config.js';
import { withTransaction, type Db } from '../db/pool.js';
import { newId } from '../ids.js';
import type { Logger } from '../logger.js';
import type { QueueRegistry } from '../platform/queues.js';
import type { TemporalHandle } from '../platform/temporal.js';
import { DeliveryClient, type AttemptResult } from './delivery-client.js';
import { MicroBatcher } from './micro-batcher.js';
import * as repo from './repository.js';
import { SIGNATURE_HEADER, signatureHeader } from './signature.js';

/**
 * How an event becomes a delivered POST, and why nothing is lost:
 * 1. A domain writes its event to outbox_events in its own transaction.
 * 2. The relay (a BullMQ job, woken by NOTIFY at commit and by a poll) claims unrelayed rows,
 *    inserts one delivery per subscribed active endpoint (unique per event and endpoint), marks
 *    the rows relayed and commits; only then it queues one job per delivery, with jobId = delivery id.
 * 3. The delivery consumer makes the first attempt at once. A failure hands the delivery to a
 *    Temporal workflow (`webhook-delivery-<delivery id>`) that retries on durable timers.
 * 4. A sweep queues again any delivery still waiting for its first attempt after a while (the
 *    process died between commit and enqueue, or holding the job).
 * Every step is idempotent, so a process killed anywhere repeats at most an attempt: receivers
 * dedupe on the event id, which never changes between attempts.
 */
export const RELAY_QUEUE = 'webhook-relay';
export const DELIVERY_QUEUE = 'webhook-delivery';
export const SWEEP_QUEUE = 'webhook-sweep';
export const DELIVERY_WORKFLOW = 'webhookDeliveryWorkflow';
export const OUTBOX_CHANNEL = 'outbox_events';

export const deliveryWorkflowId = (deliveryId: string) => `webhook-delivery-${deliveryId}`;

export interface DeliveryJobData {
  deliveryId: string;
}

export interface RetryWorkflowInput {
  deliveryId: string;
  eventId: string;
  eventType: string;
  endpointId: string;
  /** Seconds to wait before each retry; the last failure makes the delivery dead. */
  retryScheduleSeconds: number[];
}

/** What the worker's webhook code needs; built once per process. */
export interface WebhookRuntime {
  db: Db;
  queues: QueueRegistry;
  temporal: TemporalHandle;
  config: Config;
  logger: Logger;
  client: DeliveryClient;
  /** Batched reads of delivery targets and writes of finished attempts (group commit). */
  targets: MicroBatcher<string, repo.DeliveryTarget | undefined>;
  attempts: MicroBatcher<repo.AttemptRecord, repo.RecordedAttempt | undefined>;
}

export function createWebhookRuntime(platform: Omit<WebhookRuntime, 'client' | 'targets' | 'attempts'>): WebhookRuntime {
  const { config, db } = platform;
  const client = new DeliveryClient({
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    allowPrivateHosts: config.WEBHOOK_ALLOW_PRIVATE_HOSTS,
    extraCaFile: config.WEBHOOK_EXTRA_CA_FILE,
    maxSockets: Math.max(16, config.WEBHOOK_DELIVERY_CONCURRENCY),
  });
  // A quarter of the pool each, so the relay, retries and sweeps of this process still get connections.
  const maxInFlight = Math.max(1, Math.floor(config.DATABASE_POOL_MAX / 4));
  const targets = new MicroBatcher<string, repo.DeliveryTarget | undefined>(
    async (ids) => {
      const byId = new Map((await repo.loadDeliveryTargets(db, [...new Set(ids)])).map((target) => [target.id, target]));
      return ids.map((id) => byId.get(id));
    },
    { maxBatch: 500, maxInFlight },
  );
  const attempts = new MicroBatcher<repo.AttemptRecord, repo.RecordedAttempt | undefined>(
    async (records) => {
      const recorded = new Map((await repo.recordAttempts(db, records, config.WEBHOOK_FAILURE_STREAK_THRESHOLD)).map((row) => [row.deliveryId, row]));
      // A delivery named twice in one batch (a duplicate job) is updated once.
      return records.map((record) => recorded.get(record.deliveryId));
    },
    { maxBatch: 500, maxInFlight },
  );
  return { ...platform, client, targets, attempts };
}

// ---- Queueing ---------------------------------------------------------------------------------

const DELIVERY_JOB_OPTIONS = {
  // Completed and failed jobs leave nothing behind, so a later sweep may queue the same id again.
  removeOnComplete: true,
  removeOnFail: true,
  attempts: 5,
  backoff: { type: 'exponential', delay: 1_000 },
} as const;

/** One job per delivery, id = delivery id: queuing the same delivery twice while it waits is one job. */
export async function enqueueDeliveries(queues: QueueRegistry, deliveryIds: string[]): Promise<void> {
  if (deliveryIds.length === 0) return;
  await queues.queue<DeliveryJobData>(DELIVERY_QUEUE).addBulk(
    deliveryIds.map((deliveryId) => ({ name: 'first-attempt', data: { deliveryId }, opts: { ...DELIVERY_JOB_OPTIONS, jobId: deliveryId } })),
  );
}

/**
 * Asks for a relay run. While one waits, more asks are the same job; while one runs, one more is
 * kept for after it, so an event committed during a run is never left for the poll.
 */
export async function requestRelay(queues: QueueRegistry): Promise<void> {
  await queues.queue(RELAY_QUEUE).add('relay', {}, { deduplication: { id: 'relay', keepLastIfActive: true }, removeOnComplete: true, removeOnFail: true });
}

/** The relay's polling fallback and the lost-job sweep; upserted, so every worker replica may declare them. */
export async function scheduleWebhookJobs(queues: QueueRegistry, config: Config): Promise<void> {
  await queues.queue(RELAY_QUEUE).upsertJobScheduler('relay-poll', { every: config.WEBHOOK_RELAY_POLL_MS }, { name: 'relay-poll', opts: { removeOnComplete: true, removeOnFail: true } });
  const sweepEvery = Math.max(1_000, Math.min(30_000, (config.WEBHOOK_REQUEUE_AFTER_SECONDS * 1_000) / 2));
  await queues.queue(SWEEP_QUEUE).upsertJobScheduler('requeue-stale-deliveries', { every: sweepEvery }, { name: 'requeue-stale-deliveries', opts: { removeOnComplete: true, removeOnFail: true } });
}

// ---- Relay ------------------------------------------------------------------------------------

/** Moves outbox rows to deliveries until none is left; returns how many events it relayed. */
export async function relayOutbox(runtime: Pick<WebhookRuntime, 'db' | 'queues' | 'config'>): Promise<{ events: number; deliveries: number }> {
  let events = 0;
  let deliveries = 0;
  for (;;) {
    const batch = await relayBatch(runtime.db, runtime.config.WEBHOOK_RELAY_BATCH);
    // Queued only after the commit: a job never names a delivery that does not exist yet.
    await enqueueDeliveries(runtime.queues, batch.deliveryIds);
    events += batch.events;
    deliveries += batch.deliveryIds.length;
    if (batch.events < runtime.config.WEBHOOK_RELAY_BATCH) return { events, deliveries };
  }
}

async function relayBatch(db: Db, limit: number): Promise<{ events: number; deliveryIds: string[] }> {
  return withTransaction(db, async (tx) => {
    const claimed = await repo.claimOutboxEvents(tx, limit);
    if (claimed.length === 0) return { events: 0, deliveryIds: [] };
    const eventIds = claimed.map((event) => event.id);
    const pairs = await repo.subscribedEndpoints(tx, eventIds);
    const deliveryIds = await repo.insertDeliveries(
      tx,
      pairs.map((pair) => ({ ...pair, id: newId('whdel_') })),
    );
    await repo.markOutboxRelayed(tx, eventIds);
    return { events: claimed.length, deliveryIds };
  });
}

/** Queues again the first attempts that should have happened by now. */
export async function requeueStaleDeliveries(runtime: Pick<WebhookRuntime, 'db' | 'queues' | 'config'>): Promise<number> {
  const ids = await repo.staleQueuedDeliveries(runtime.db, runtime.config.WEBHOOK_REQUEUE_AFTER_SECONDS, 5_000);
  await enqueueDeliveries(runtime.queues, ids);
  return ids.length;
}

// ---- Attempts ---------------------------------------------------------------------------------

/** The body every attempt of a delivery sends, byte for byte: receivers dedupe on `id`. */
export function eventEnvelope(target: Pick<repo.DeliveryTarget, 'event_id' | 'event_type' | 'event_created_at' | 'event_data'>): string {
  return JSON.stringify({
    id: target.event_id,
    object: 'event',
    type: target.event_type,
    created: Math.floor(target.event_created_at.getTime() / 1_000),
    api_version: 'v1',
    data: target.event_data,
  });
}

async function send(runtime: WebhookRuntime, target: repo.DeliveryTarget): Promise<AttemptResult> {
  const body = eventEnvelope(target);
  const secrets = target.previous_secret ? [target.secret, target.previous_secret] : [target.secret];
  return runtime.client.post(target.url, body, {
    'User-Agent': 'svc-webhooks/1.0',
    [SIGNATURE_HEADER]: signatureHeader(body, secrets, Math.floor(Date.now() / 1_000)),
    'X-Svc-Event-Id': target.event_id,
    'X-Svc-Event-Type': target.event_type,
    'X-Svc-Delivery-Id': target.id,
    'X-Svc-Delivery-Attempt': String(target.attempt_count + 1),
  });
}

export type FirstAttemptOutcome = 'succeeded' | 'retrying' | 'dead' | 'skipped';

/**
 * The queued attempt: the first attempt of an event's delivery, a webhook.test, or a replay of a
 * dead delivery. Only an event's first failure goes on to the retry workflow; a test or a replay
 * that fails is dead again (and may be retried by hand).
 */
export async function attemptQueuedDelivery(runtime: WebhookRuntime, deliveryId: string): Promise<FirstAttemptOutcome> {
  const target = await runtime.targets.submit(deliveryId);
  if (!target || (target.status !== 'pending' && target.status !== 'replayed')) return 'skipped';
  const requestedByHand = target.origin === 'test' || target.status === 'replayed';
  if (!requestedByHand && target.endpoint_status !== 'active') {
    await repo.markDeliveryDead(runtime.db, deliveryId, target.status, `not sent: the endpoint is ${target.endpoint_status}`);
    return 'dead';
  }

  const result = await send(runtime, target);
  const schedule = runtime.config.WEBHOOK_RETRY_SCHEDULE_SECONDS;
  const retries = !result.ok && !requestedByHand && schedule.length > 0;
  if (retries) {
    // The workflow starts before the state says so: if this process dies in between, the job runs
    // again and finds the workflow already started.
    await startRetryWorkflow(runtime, {
      deliveryId,
      eventId: target.event_id,
      eventType: target.event_type,
      endpointId: target.endpoint_id,
      retryScheduleSeconds: schedule,
    });
  }
  const nextStatus = result.ok ? 'succeeded' : retries ? 'retrying' : 'dead';
  await record(runtime, target, target.status, nextStatus, result, retries ? new Date(Date.now() + schedule[0]! * 1_000) : null);
  return nextStatus;
}

export type RetryOutcome = 'succeeded' | 'failed' | 'dead' | 'stopped';

/**
 * One retry of the workflow. `nextDelaySeconds` is the wait before the following retry, or null
 * when this is the last one: its failure makes the delivery dead.
 */
export async function attemptRetry(runtime: WebhookRuntime, deliveryId: string, nextDelaySeconds: number | null): Promise<RetryOutcome> {
  const target = await runtime.targets.submit(deliveryId);
  if (!target || target.status !== 'retrying') return 'stopped';
  if (target.endpoint_status !== 'active') {
    await repo.markDeliveryDead(runtime.db, deliveryId, 'retrying', `retries stopped: the endpoint is ${target.endpoint_status}`);
    return 'stopped';
  }
  const result = await send(runtime, target);
  const nextStatus = result.ok ? 'succeeded' : nextDelaySeconds === null ? 'dead' : 'retrying';
  await record(runtime, target, 'retrying', nextStatus, result, nextStatus === 'retrying' ? new Date(Date.now() + nextDelaySeconds! * 1_000) : null);
  return result.ok ? 'succeeded' : nextStatus === 'dead' ? 'dead' : 'failed';
}

async function record(
  runtime: WebhookRuntime,
  target: repo.DeliveryTarget,
  expectedStatus: repo.DeliveryStatus,
  nextStatus: repo.DeliveryStatus,
  result: AttemptResult,
  nextAttemptAt: Date | null,
): Promise<void> {
  const recorded = await runtime.attempts.submit({
    deliveryId: target.id,
    expectedStatus,
    nextStatus,
    nextAttemptAt,
    ok: result.ok,
    responseStatus: result.status,
    error: result.error,
    durationMs: result.durationMs,
  });
  const endpointStatus = recorded?.endpointStatus;
  if (!result.ok && endpointStatus === 'disabled_after_failures' && target.endpoint_status === 'active') {
    runtime.logger.warn({ endpointId: target.endpoint_id, threshold: runtime.config.WEBHOOK_FAILURE_STREAK_THRESHOLD }, 'webhook endpoint disabled after a failure streak');
  }
}

/** Idempotent: the workflow id is the delivery's, so a second start finds the first. */
async function startRetryWorkflow(runtime: WebhookRuntime, input: RetryWorkflowInput): Promise<void> {
  try {
    await runtime.temporal.client.workflow.start(DELIVERY_WORKFLOW, {
      taskQueue: runtime.config.TEMPORAL_TASK_QUEUE,
      workflowId: deliveryWorkflowId(input.deliveryId),
      args: [input],
      staticSummary: `Retries of ${input.eventType} ${input.eventId} to endpoint ${input.endpointId}`,
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}
