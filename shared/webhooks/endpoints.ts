import type { Config } from '../config.js';
import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { newId } from '../ids.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { QueueRegistry } from '../platform/queues.js';
import { enqueueDeliveries } from './delivery.js';
import * as repo from './repository.js';
import { URL_ERRORS, type DeliveryListQuery, type EndpointListQuery, type EndpointPatch, type EndpointRegistration, type RegistrationForm, type SecretRotation } from './schemas.js';
import { newSigningSecret } from './signature.js';
import { assertSafeDestination, WEBHOOK_URL_ERRORS, type WebhookUrlErrors } from './url-guard.js';

/** Endpoint management (spec 1, "Webhooks"): the rules behind /v1/webhooks and /v1/webhook_endpoints, on bodies parsed with schemas.ts. */
export const DEFAULT_ROTATION_GRACE_MINUTES = 1_440;
const UNIQUE_VIOLATION = '23505';

export interface WebhookDeps {
  db: Db;
  config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_HOSTS'>;
}

/** The schema has checked the url's form; its host must also resolve only to safe addresses now (url-guard.ts). */
async function assertSafeUrl(deps: WebhookDeps, url: string, errors: WebhookUrlErrors): Promise<void> {
  await assertSafeDestination(new URL(url), deps.config.WEBHOOK_ALLOW_PRIVATE_HOSTS, errors);
}

const urlInUse = () => serviceError('webhook_url_in_use', { param: 'url' });
const endpointNotFound = () => serviceError('not_found', { message: 'No such webhook endpoint.' });

export async function createEndpoint(deps: WebhookDeps, developerId: string, input: EndpointRegistration, form: RegistrationForm = 'webhooks'): Promise<repo.EndpointRow> {
  await assertSafeUrl(deps, input.url, URL_ERRORS[form]);
  const endpoint = await repo.insertEndpoint(deps.db, {
    id: newId('wh_'),
    developerId,
    url: input.url,
    description: input.description ?? null,
    events: input.events,
    secret: newSigningSecret(),
    rotationGraceMinutes: input.rotation_grace_minutes ?? DEFAULT_ROTATION_GRACE_MINUTES,
  });
  if (!endpoint) throw urlInUse();
  return endpoint;
}

export async function getEndpoint(db: Queryable, developerId: string, id: string): Promise<repo.EndpointRow> {
  const endpoint = await repo.findEndpoint(db, developerId, id);
  if (!endpoint) throw endpointNotFound();
  return endpoint;
}

export async function listEndpoints(db: Db, developerId: string, query: EndpointListQuery): Promise<Page<ReturnType<typeof formatEndpoint>>> {
  const page = pageRequest(query);
  return toPage(await repo.listEndpoints(db, developerId, page, query.status), page, (row) => formatEndpoint(row));
}

/**
 * url, events, description, rotation_grace_minutes and status. Status moves only between active
 * and paused, and from disabled_after_failures back to active (a manual re-enable, which clears
 * the failure streak); disabled_after_failures is the delivery worker's alone to set.
 */
export async function updateEndpoint(deps: WebhookDeps, developerId: string, id: string, input: EndpointPatch): Promise<repo.EndpointRow> {
  if (Object.keys(input).length === 0) throw serviceError('empty_patch');
  const existing = await getEndpoint(deps.db, developerId, id);
  const changes: repo.EndpointChanges = {};
  if (input.url !== undefined) {
    await assertSafeUrl(deps, input.url, WEBHOOK_URL_ERRORS);
    changes.url = input.url;
  }
  if (input.events !== undefined) changes.events = input.events;
  if (input.description !== undefined) changes.description = input.description;
  if (input.rotation_grace_minutes !== undefined) changes.rotation_grace_minutes = input.rotation_grace_minutes;
  if (input.status !== undefined) changes.status = statusTransition(existing.status, input.status);
  try {
    const updated = await repo.updateEndpoint(deps.db, developerId, id, changes);
    if (!updated) throw endpointNotFound();
    return updated;
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw urlInUse();
    throw error;
  }
}

/** The schema allows only active and paused; a disabled endpoint can only be re-enabled. */
function statusTransition(from: repo.EndpointStatus, to: 'active' | 'paused'): 'active' | 'paused' {
  if (from === 'disabled_after_failures' && to === 'paused') {
    throw serviceError('invalid_status_transition', { param: 'status', message: 'A disabled endpoint can only be re-enabled (status active).' });
  }
  return to;
}

export async function deleteEndpoint(db: Db, developerId: string, id: string): Promise<void> {
  if (!(await repo.deleteEndpoint(db, developerId, id))) throw endpointNotFound();
}

/** A new secret, returned once; the previous one keeps verifying for the grace window (default: the endpoint's). */
export async function rotateEndpointSecret(db: Db, developerId: string, id: string, input: SecretRotation): Promise<repo.EndpointRow> {
  const existing = await getEndpoint(db, developerId, id);
  const grace = input.rotation_grace_minutes ?? existing.rotation_grace_minutes;
  const rotated = await repo.rotateSecret(db, developerId, id, newSigningSecret(), grace);
  if (!rotated) throw endpointNotFound();
  return rotated;
}

/** Records a webhook.test event for this endpoint alone and queues its delivery now. */
export async function sendTestEvent(deps: { db: Db; queues: QueueRegistry }, developerId: string, id: string): Promise<repo.DeliveryRow> {
  const delivery = await withTransaction(deps.db, async (tx) => {
    const endpoint = await getEndpoint(tx, developerId, id);
    // Recorded as already relayed: it goes to this endpoint only, not to every webhook.test subscriber.
    const { id: eventId } = await recordEvent(
      tx,
      developerId,
      'webhook.test',
      { webhook_endpoint_id: endpoint.id, message: 'A test event sent by POST /v1/webhooks/{id}/test.' },
      { relayed: true },
    );
    const deliveryId = newId('whdel_');
    await repo.insertDeliveries(tx, [{ id: deliveryId, event_id: eventId, endpoint_id: endpoint.id, developer_id: developerId, type: 'webhook.test' }], 'test');
    return (await repo.findDelivery(tx, developerId, endpoint.id, deliveryId))!;
  });
  await enqueueDeliveries(deps.queues, [delivery.id]);
  return delivery;
}

export async function listEndpointDeliveries(db: Db, developerId: string, id: string, query: DeliveryListQuery): Promise<Page<ReturnType<typeof formatDelivery>>> {
  await getEndpoint(db, developerId, id);
  const page = pageRequest(query);
  const rows = await repo.listDeliveries(db, developerId, id, page, query.status);
  const attempts = await repo.attemptsOf(db, rows.map((row) => row.id));
  const byDelivery = new Map<string, repo.AttemptRow[]>();
  for (const attempt of attempts) byDelivery.set(attempt.delivery_id, [...(byDelivery.get(attempt.delivery_id) ?? []), attempt]);
  return toPage(rows, page, (row) => formatDelivery(row, byDelivery.get(row.id) ?? []));
}

/** Replays a dead delivery (one attempt, now); any other state is 409 delivery_not_retryable. */
export async function retryDelivery(deps: { db: Db; queues: QueueRegistry }, developerId: string, id: string, deliveryId: string): Promise<repo.DeliveryRow> {
  await getEndpoint(deps.db, developerId, id);
  const replayed = await repo.replayDelivery(deps.db, developerId, id, deliveryId);
  if (!replayed) {
    const existing = await repo.findDelivery(deps.db, developerId, id, deliveryId);
    if (!existing) throw serviceError('not_found', { message: 'No such delivery of this webhook endpoint.' });
    throw serviceError('delivery_not_retryable', { message: `Only a dead delivery can be retried; this one is ${existing.status}.` });
  }
  await enqueueDeliveries(deps.queues, [replayed.id]);
  return replayed;
}

const iso = (value: Date | null) => value?.toISOString() ?? null;

/** The endpoint object; the secret only when it was just made (create, rotate_secret). */
export function formatEndpoint(endpoint: repo.EndpointRow, options: { withSecret?: boolean } = {}) {
  return {
    id: endpoint.id,
    object: 'webhook_endpoint' as const,
    url: endpoint.url,
    description: endpoint.description,
    events: endpoint.events,
    status: endpoint.status,
    ...(options.withSecret && { secret: endpoint.secret }),
    failure_streak: endpoint.failure_streak,
    rotation_grace_minutes: endpoint.rotation_grace_minutes,
    previous_secret_expires_at: endpoint.previous_secret_expires_at && endpoint.previous_secret_expires_at > new Date() ? iso(endpoint.previous_secret_expires_at) : null,
    last_success_at: iso(endpoint.last_success_at),
    last_failure_at: iso(endpoint.last_failure_at),
    disabled_at: iso(endpoint.disabled_at),
    created_at: endpoint.created_at.toISOString(),
    updated_at: endpoint.updated_at.toISOString(),
  };
}

export function formatDelivery(delivery: repo.DeliveryRow, attempts: repo.AttemptRow[] = []) {
  return {
    id: delivery.id,
    object: 'webhook_delivery' as const,
    webhook_endpoint_id: delivery.endpoint_id,
    event_id: delivery.event_id,
    event_type: delivery.event_type,
    status: delivery.status,
    attempt_count: delivery.attempt_count,
    response_status: delivery.last_response_status,
    last_error: delivery.last_error,
    last_attempt_at: iso(delivery.last_attempt_at),
    next_attempt_at: iso(delivery.next_attempt_at),
    replay_count: delivery.replay_count,
    created_at: delivery.created_at.toISOString(),
    completed_at: iso(delivery.completed_at),
    attempts: attempts.map((attempt) => ({
      attempt: attempt.attempt,
      attempted_at: attempt.attempted_at.toISOString(),
      response_status: attempt.response_status,
      error: attempt.error,
      duration_ms: attempt.duration_ms,
    })),
  };
}
