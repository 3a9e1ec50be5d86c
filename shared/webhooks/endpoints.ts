import { z } from 'zod';
import type { Config } from '../config.js';
import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { isEventType } from '../events/types.js';
import { newId } from '../ids.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { QueueRegistry } from '../platform/queues.js';
import { enqueueDeliveries } from './delivery.js';
import * as repo from './repository.js';
import type { DeliveryListQuery, EndpointListQuery } from './schemas.js';
import { newSigningSecret } from './signature.js';
import { assertSafeDestination, parseWebhookUrl, WEBHOOK_URL_ERRORS, type WebhookUrlErrors } from './url-guard.js';

/** Endpoint management (spec 1, "Webhooks"): the rules behind /v1/webhooks and /v1/webhook_endpoints. */
export const DEFAULT_ROTATION_GRACE_MINUTES = 1_440;
export const MAX_ROTATION_GRACE_MINUTES = 10_080;
const MAX_DESCRIPTION_LENGTH = 512;
const UNIQUE_VIOLATION = '23505';

export interface WebhookDeps {
  db: Db;
  config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_HOSTS'>;
}

/**
 * The two registration forms. POST /v1/webhooks answers each URL problem with its own code;
 * POST /v1/webhook_endpoints documents a single invalid_url for all of them.
 */
export type RegistrationForm = 'webhooks' | 'webhook_endpoints';
const URL_ERRORS: Record<RegistrationForm, WebhookUrlErrors> = {
  webhooks: WEBHOOK_URL_ERRORS,
  webhook_endpoints: { missing: 'invalid_url', insecure: 'invalid_url', malformed: 'invalid_url' },
};

const url = z.string().describe('An https URL that accepts POST requests.');
const events = z.array(z.string()).min(1).describe('Event types to deliver (see docs/webhooks.md).');
const endpointDescription = z.string().max(MAX_DESCRIPTION_LENGTH).nullable();
const rotationGrace = z.number().int().min(0).max(MAX_ROTATION_GRACE_MINUTES);

/** The bodies each form accepts; their field names are what a request may send (semantic checks follow in code). */
export const WEBHOOK_BODIES = {
  webhooks: z.strictObject({ url, events, description: endpointDescription.optional(), rotation_grace_minutes: rotationGrace.optional() }),
  webhook_endpoints: z.strictObject({ url, events, description: endpointDescription.optional(), rotation_grace_minutes: rotationGrace.optional() }),
  patch: z.strictObject({ url: url.optional(), events: events.optional(), description: endpointDescription.optional(), rotation_grace_minutes: rotationGrace.optional(), status: z.enum(['active', 'paused']).optional() }),
  rotate: z.strictObject({ rotation_grace_minutes: rotationGrace.optional() }),
};

const FIELDS = Object.fromEntries(Object.entries(WEBHOOK_BODIES).map(([form, schema]) => [form, Object.keys(schema.shape)])) as Record<keyof typeof WEBHOOK_BODIES, string[]>;

function bodyObject(body: unknown, allowed: readonly string[], optional = false): Record<string, unknown> {
  if ((body === undefined || body === null) && optional) return {};
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw serviceError('invalid_request', { message: 'The request body must be a JSON object.' });
  }
  for (const field of Object.keys(body)) {
    if (!allowed.includes(field)) throw serviceError('invalid_request', { message: `Unrecognized request field: ${field}.`, param: field });
  }
  return body as Record<string, unknown>;
}

async function parseUrl(deps: WebhookDeps, value: unknown, errors: WebhookUrlErrors): Promise<string> {
  const url = parseWebhookUrl(value, errors);
  await assertSafeDestination(url, deps.config.WEBHOOK_ALLOW_PRIVATE_HOSTS, errors);
  return url.href;
}

/** A non-empty list of registered types (reserved ones included), duplicates dropped. */
function parseEvents(value: unknown): string[] {
  if (value === undefined || value === null || (Array.isArray(value) && value.length === 0)) throw serviceError('empty_events', { param: 'events' });
  if (!Array.isArray(value) || value.some((type) => typeof type !== 'string')) {
    throw serviceError('invalid_request', { param: 'events', message: 'events must be an array of event type names.' });
  }
  const unknown = (value as string[]).find((type) => !isEventType(type));
  if (unknown !== undefined) throw serviceError('unknown_event_type', { param: 'events', message: `${JSON.stringify(unknown.slice(0, 100))} is not a registered event type.` });
  return [...new Set(value as string[])];
}

const graceSchema = rotationGrace;
function parseGrace(value: unknown): number {
  const parsed = graceSchema.safeParse(value);
  if (!parsed.success) throw serviceError('invalid_rotation_grace', { param: 'rotation_grace_minutes' });
  return parsed.data;
}

function parseDescription(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || value.length > MAX_DESCRIPTION_LENGTH) {
    throw serviceError('invalid_request', { param: 'description', message: `description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters.` });
  }
  return value;
}

const urlInUse = () => serviceError('webhook_url_in_use', { param: 'url' });
const endpointNotFound = () => serviceError('not_found', { message: 'No such webhook endpoint.' });

export async function createEndpoint(deps: WebhookDeps, developerId: string, body: unknown, form: RegistrationForm = 'webhooks'): Promise<repo.EndpointRow> {
  const input = bodyObject(body, FIELDS[form]);
  const url = await parseUrl(deps, input.url, URL_ERRORS[form]);
  const events = parseEvents(input.events);
  const rotationGraceMinutes = input.rotation_grace_minutes === undefined ? DEFAULT_ROTATION_GRACE_MINUTES : parseGrace(input.rotation_grace_minutes);
  const description = input.description === undefined ? null : parseDescription(input.description);
  const endpoint = await repo.insertEndpoint(deps.db, { id: newId('wh_'), developerId, url, description, events, secret: newSigningSecret(), rotationGraceMinutes });
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
export async function updateEndpoint(deps: WebhookDeps, developerId: string, id: string, body: unknown): Promise<repo.EndpointRow> {
  const input = bodyObject(body, FIELDS.patch);
  if (Object.keys(input).length === 0) throw serviceError('empty_patch');
  const existing = await getEndpoint(deps.db, developerId, id);
  const changes: repo.EndpointChanges = {};
  if (input.url !== undefined) changes.url = await parseUrl(deps, input.url, WEBHOOK_URL_ERRORS);
  if (input.events !== undefined) changes.events = parseEvents(input.events);
  if (input.description !== undefined) changes.description = parseDescription(input.description);
  if (input.rotation_grace_minutes !== undefined) changes.rotation_grace_minutes = parseGrace(input.rotation_grace_minutes);
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

function statusTransition(from: repo.EndpointStatus, to: unknown): 'active' | 'paused' {
  const refuse = (message: string) => serviceError('invalid_status_transition', { param: 'status', message });
  if (to !== 'active' && to !== 'paused') {
    throw refuse(to === 'disabled_after_failures' ? 'Only the delivery worker disables an endpoint; set status to paused instead.' : 'status must be active or paused.');
  }
  if (from === 'disabled_after_failures' && to === 'paused') throw refuse('A disabled endpoint can only be re-enabled (status active).');
  return to;
}

export async function deleteEndpoint(db: Db, developerId: string, id: string): Promise<void> {
  if (!(await repo.deleteEndpoint(db, developerId, id))) throw endpointNotFound();
}

/** A new secret, returned once; the previous one keeps verifying for the grace window (default: the endpoint's). */
export async function rotateEndpointSecret(db: Db, developerId: string, id: string, body: unknown): Promise<repo.EndpointRow> {
  const input = bodyObject(body, FIELDS.rotate, true);
  const existing = await getEndpoint(db, developerId, id);
  const grace = input.rotation_grace_minutes === undefined ? existing.rotation_grace_minutes : parseGrace(input.rotation_grace_minutes);
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
