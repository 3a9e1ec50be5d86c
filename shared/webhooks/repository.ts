import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/**
 * All SQL of webhooks. Endpoint queries are filtered by developer, so another developer's id is
 * simply not found; the worker's delivery queries go by delivery id. The relay's and the delivery
 * consumer's statements are named (prepared once per connection): they run for every event.
 */

export type EndpointStatus = 'active' | 'paused' | 'disabled_after_failures';
export type DeliveryStatus = 'pending' | 'retrying' | 'succeeded' | 'dead' | 'replayed';

export interface EndpointRow {
  id: string;
  developer_id: string;
  url: string;
  description: string | null;
  events: string[];
  status: EndpointStatus;
  secret: string;
  rotation_grace_minutes: number;
  previous_secret_expires_at: Date | null;
  failure_streak: number;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  disabled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const ENDPOINT_COLUMNS = `id, developer_id, url, description, events, status, secret, rotation_grace_minutes, previous_secret_expires_at,
  failure_streak, last_success_at, last_failure_at, disabled_at, created_at, updated_at`;

export async function insertEndpoint(
  q: Queryable,
  values: { id: string; developerId: string; url: string; description: string | null; events: string[]; secret: string; rotationGraceMinutes: number },
): Promise<EndpointRow | undefined> {
  const { rows } = await q.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, developer_id, url, description, events, secret, rotation_grace_minutes)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT ON CONSTRAINT webhook_endpoints_url_key DO NOTHING
     RETURNING ${ENDPOINT_COLUMNS}`,
    [values.id, values.developerId, values.url, values.description, values.events, values.secret, values.rotationGraceMinutes],
  );
  return rows[0];
}

export async function findEndpoint(q: Queryable, developerId: string, id: string): Promise<EndpointRow | undefined> {
  const { rows } = await q.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE developer_id = $1 AND id = $2`, [developerId, id]);
  return rows[0];
}

export async function listEndpoints(q: Queryable, developerId: string, page: { limit: number; after: CursorPosition | undefined }, status: EndpointStatus | undefined): Promise<EndpointRow[]> {
  const { rows } = await q.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
     WHERE developer_id = $1
       AND ($2::text IS NULL OR status = $2)
       AND ($3::text IS NULL OR (created_at, id) > (SELECT w.created_at, w.id FROM webhook_endpoints w WHERE w.developer_id = $1 AND w.id = $3))
     ORDER BY created_at, id
     LIMIT $4`,
    [developerId, status ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  rotation_grace_minutes?: number;
  status?: 'active' | 'paused';
}

/** A re-enable (status active) starts a fresh failure streak. */
export async function updateEndpoint(q: Queryable, developerId: string, id: string, changes: EndpointChanges): Promise<EndpointRow | undefined> {
  const columns = (['url', 'events', 'description', 'rotation_grace_minutes', 'status'] as const).filter((column) => changes[column] !== undefined);
  const sets = columns.map((column, i) => `${column} = $${i + 3}`);
  if (changes.status === 'active') sets.push(`failure_streak = CASE WHEN status = 'active' THEN failure_streak ELSE 0 END`, 'disabled_at = NULL');
  const { rows } = await q.query<EndpointRow>(
    `UPDATE webhook_endpoints SET ${[...sets, 'updated_at = now()'].join(', ')}
     WHERE developer_id = $1 AND id = $2
     RETURNING ${ENDPOINT_COLUMNS}`,
    [developerId, id, ...columns.map((column) => changes[column])],
  );
  return rows[0];
}

export async function deleteEndpoint(q: Queryable, developerId: string, id: string): Promise<boolean> {
  const { rowCount } = await q.query('DELETE FROM webhook_endpoints WHERE developer_id = $1 AND id = $2', [developerId, id]);
  return (rowCount ?? 0) > 0;
}

/** The current secret becomes the previous one, verifying until the grace window ends. */
export async function rotateSecret(q: Queryable, developerId: string, id: string, secret: string, graceMinutes: number): Promise<EndpointRow | undefined> {
  const { rows } = await q.query<EndpointRow>(
    `UPDATE webhook_endpoints
     SET previous_secret = secret, previous_secret_expires_at = now() + make_interval(mins => $4), secret = $3, updated_at = now()
     WHERE developer_id = $1 AND id = $2
     RETURNING ${ENDPOINT_COLUMNS}`,
    [developerId, id, secret, graceMinutes],
  );
  return rows[0];
}

// ---- Deliveries -------------------------------------------------------------------------------

export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  origin: 'event' | 'test';
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  last_response_status: number | null;
  last_error: string | null;
  replay_count: number;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

export interface AttemptRow {
  delivery_id: string;
  attempt: number;
  attempted_at: Date;
  response_status: number | null;
  error: string | null;
  duration_ms: number;
}

const DELIVERY_COLUMNS = `id, endpoint_id, event_id, event_type, origin, status, attempt_count, next_attempt_at, last_attempt_at,
  last_response_status, last_error, replay_count, created_at, updated_at, completed_at`;

export interface ClaimedEvent {
  id: string;
  developer_id: string;
  type: string;
}

/** Locks a batch of unrelayed outbox rows; concurrent relays skip each other's rows. */
export async function claimOutboxEvents(q: Queryable, limit: number): Promise<ClaimedEvent[]> {
  const { rows } = await q.query<ClaimedEvent>({
    name: 'webhooks-claim-outbox',
    text: `SELECT id, developer_id, type FROM outbox_events
           WHERE relayed_at IS NULL
           ORDER BY created_at, id
           LIMIT $1
           FOR UPDATE SKIP LOCKED`,
    values: [limit],
  });
  return rows;
}

/** Every (event, active subscribed endpoint) pair of the claimed events. */
export async function subscribedEndpoints(q: Queryable, eventIds: string[]): Promise<{ event_id: string; endpoint_id: string; developer_id: string; type: string }[]> {
  const { rows } = await q.query({
    name: 'webhooks-subscribed-endpoints',
    text: `SELECT e.id AS event_id, w.id AS endpoint_id, e.developer_id, e.type
           FROM outbox_events e
           JOIN webhook_endpoints w ON w.developer_id = e.developer_id AND w.status = 'active' AND e.type = ANY (w.events)
           WHERE e.id = ANY ($1::text[])`,
    values: [eventIds],
  });
  return rows;
}

/** Inserts deliveries; a pair that already has one is skipped. Returns the ids actually inserted. */
export async function insertDeliveries(
  q: Queryable,
  deliveries: { id: string; event_id: string; endpoint_id: string; developer_id: string; type: string }[],
  origin: 'event' | 'test' = 'event',
): Promise<string[]> {
  if (deliveries.length === 0) return [];
  const { rows } = await q.query<{ id: string }>({
    name: 'webhooks-insert-deliveries',
    text: `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, developer_id, event_type, origin)
           SELECT id, event_id, endpoint_id, developer_id, event_type, $6
           FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[], $5::text[]) AS t (id, event_id, endpoint_id, developer_id, event_type)
           ON CONFLICT ON CONSTRAINT webhook_deliveries_event_endpoint_key DO NOTHING
           RETURNING id`,
    values: [
      deliveries.map((d) => d.id),
      deliveries.map((d) => d.event_id),
      deliveries.map((d) => d.endpoint_id),
      deliveries.map((d) => d.developer_id),
      deliveries.map((d) => d.type),
      origin,
    ],
  });
  return rows.map((row) => row.id);
}

export async function markOutboxRelayed(q: Queryable, eventIds: string[]): Promise<void> {
  await q.query({ name: 'webhooks-mark-relayed', text: 'UPDATE outbox_events SET relayed_at = now() WHERE id = ANY ($1::text[])', values: [eventIds] });
}

/** Deliveries whose queued attempt has waited longer than it should: their job may have been lost. */
export async function staleQueuedDeliveries(q: Queryable, olderThanSeconds: number, limit: number): Promise<string[]> {
  const { rows } = await q.query<{ id: string }>(
    `SELECT id FROM webhook_deliveries
     WHERE status IN ('pending', 'replayed') AND updated_at < now() - make_interval(secs => $1)
     ORDER BY updated_at
     LIMIT $2`,
    [olderThanSeconds, limit],
  );
  return rows.map((row) => row.id);
}

/** Everything one attempt needs, in one round trip. */
export interface DeliveryTarget {
  id: string;
  status: DeliveryStatus;
  origin: 'event' | 'test';
  attempt_count: number;
  event_id: string;
  event_type: string;
  event_data: unknown;
  event_created_at: Date;
  endpoint_id: string;
  endpoint_status: EndpointStatus;
  url: string;
  secret: string;
  /** Set while the rotation grace window is open. */
  previous_secret: string | null;
}

/** The targets of several deliveries in one round trip (the delivery consumer batches its look-ups). */
export async function loadDeliveryTargets(q: Queryable, deliveryIds: string[]): Promise<DeliveryTarget[]> {
  const { rows } = await q.query<DeliveryTarget>({
    name: 'webhooks-load-targets',
    text: `SELECT d.id, d.status, d.origin, d.attempt_count, d.event_id, d.event_type, e.data AS event_data, e.created_at AS event_created_at,
                  w.id AS endpoint_id, w.status AS endpoint_status, w.url, w.secret,
                  CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret END AS previous_secret
           FROM webhook_deliveries d
           JOIN outbox_events e ON e.id = d.event_id
           JOIN webhook_endpoints w ON w.id = d.endpoint_id
           WHERE d.id = ANY ($1::text[])`,
    values: [deliveryIds],
  });
  return rows;
}

export interface AttemptRecord {
  deliveryId: string;
  /** The attempt is recorded only while the delivery is still in this state (a duplicate job loses). */
  expectedStatus: DeliveryStatus;
  nextStatus: DeliveryStatus;
  nextAttemptAt: Date | null;
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

export interface RecordedAttempt {
  deliveryId: string;
  endpointId: string;
  /** The endpoint's status after this statement, when the statement changed the endpoint. */
  endpointStatus: EndpointStatus | null;
}

/**
 * One statement for a batch of finished attempts, in the order they finished: each delivery's new
 * state and attempt row, then each endpoint's streak once. A 2xx resets the streak, so an endpoint
 * ends with the failures that came after its last success in the batch (added to its stored
 * streak when the batch has no success); at the threshold an active endpoint becomes
 * disabled_after_failures. An all-success batch touches an endpoint row only when something
 * changes, so thousands of deliveries to one endpoint do not queue on its row lock
 * (last_success_at is kept to the second).
 */
const STREAK = 'CASE WHEN o.any_success THEN o.trailing_failures ELSE w.failure_streak + o.trailing_failures END';

export async function recordAttempts(q: Queryable, records: AttemptRecord[], failureStreakThreshold: number): Promise<RecordedAttempt[]> {
  const { rows } = await q.query<{ delivery_id: string; endpoint_id: string; endpoint_status: EndpointStatus | null }>({
    name: 'webhooks-record-attempts',
    text: `WITH input AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::boolean[], $6::integer[], $7::text[], $8::integer[])
               WITH ORDINALITY AS t (delivery_id, expected_status, next_status, next_attempt_at, ok, response_status, error, duration_ms, position)
           ), delivery AS (
             UPDATE webhook_deliveries d
             SET status = i.next_status, attempt_count = d.attempt_count + 1, last_attempt_at = now(), last_response_status = i.response_status,
                 last_error = i.error, next_attempt_at = i.next_attempt_at, updated_at = now(),
                 completed_at = CASE WHEN i.next_status IN ('succeeded', 'dead') THEN now() END
             FROM input i
             WHERE d.id = i.delivery_id AND d.status = i.expected_status
             RETURNING d.id, d.endpoint_id, d.attempt_count, i.ok, i.response_status, i.error, i.duration_ms, i.position
           ), attempt AS (
             INSERT INTO webhook_delivery_attempts (delivery_id, attempt, response_status, error, duration_ms)
             SELECT id, attempt_count, response_status, error, duration_ms FROM delivery
           ), outcome AS (
             SELECT endpoint_id, bool_or(ok) AS any_success,
                    count(*) FILTER (WHERE NOT ok AND position > coalesce(last_success, 0))::integer AS trailing_failures
             FROM (SELECT *, max(position) FILTER (WHERE ok) OVER (PARTITION BY endpoint_id) AS last_success FROM delivery) per_endpoint
             GROUP BY endpoint_id
           ), endpoint AS (
             UPDATE webhook_endpoints w
             SET failure_streak = ${STREAK},
                 last_success_at = CASE WHEN o.any_success THEN now() ELSE w.last_success_at END,
                 last_failure_at = CASE WHEN o.trailing_failures > 0 THEN now() ELSE w.last_failure_at END,
                 status = CASE WHEN w.status = 'active' AND ${STREAK} >= $9 THEN 'disabled_after_failures' ELSE w.status END,
                 disabled_at = CASE WHEN w.status = 'active' AND ${STREAK} >= $9 THEN now() ELSE w.disabled_at END
             FROM outcome o
             WHERE w.id = o.endpoint_id
               AND (o.trailing_failures > 0 OR w.failure_streak <> 0 OR w.last_success_at IS NULL OR w.last_success_at < now() - interval '1 second')
             RETURNING w.id, w.status
           )
           SELECT delivery.id AS delivery_id, delivery.endpoint_id, endpoint.status AS endpoint_status
           FROM delivery LEFT JOIN endpoint ON endpoint.id = delivery.endpoint_id`,
    values: [
      records.map((r) => r.deliveryId),
      records.map((r) => r.expectedStatus),
      records.map((r) => r.nextStatus),
      records.map((r) => r.nextAttemptAt),
      records.map((r) => r.ok),
      records.map((r) => r.responseStatus),
      records.map((r) => r.error),
      records.map((r) => r.durationMs),
      failureStreakThreshold,
    ],
  });
  return rows.map((row) => ({ deliveryId: row.delivery_id, endpointId: row.endpoint_id, endpointStatus: row.endpoint_status }));
}

/** Ends a delivery without an attempt (its endpoint was paused, disabled or deleted meanwhile). */
export async function markDeliveryDead(q: Queryable, deliveryId: string, expectedStatus: DeliveryStatus, reason: string): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE webhook_deliveries SET status = 'dead', last_error = $3, next_attempt_at = NULL, updated_at = now(), completed_at = now()
     WHERE id = $1 AND status = $2`,
    [deliveryId, expectedStatus, reason],
  );
  return (rowCount ?? 0) > 0;
}

export async function findDelivery(q: Queryable, developerId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
  const { rows } = await q.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE developer_id = $1 AND endpoint_id = $2 AND id = $3`,
    [developerId, endpointId, deliveryId],
  );
  return rows[0];
}

/** Newest first. */
export async function listDeliveries(
  q: Queryable,
  developerId: string,
  endpointId: string,
  page: { limit: number; after: CursorPosition | undefined },
  status: DeliveryStatus | undefined,
): Promise<DeliveryRow[]> {
  const { rows } = await q.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
     WHERE developer_id = $1 AND endpoint_id = $2
       AND ($3::text IS NULL OR status = $3)
       AND ($4::text IS NULL OR (created_at, id) < (SELECT d.created_at, d.id FROM webhook_deliveries d WHERE d.endpoint_id = $2 AND d.id = $4))
     ORDER BY created_at DESC, id DESC
     LIMIT $5`,
    [developerId, endpointId, status ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export async function attemptsOf(q: Queryable, deliveryIds: string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  const { rows } = await q.query<AttemptRow>(
    `SELECT delivery_id, attempt, attempted_at, response_status, error, duration_ms FROM webhook_delivery_attempts
     WHERE delivery_id = ANY ($1::text[]) ORDER BY delivery_id, attempt`,
    [deliveryIds],
  );
  return rows;
}

/** dead -> replayed; any other state is left alone (the caller answers delivery_not_retryable). */
export async function replayDelivery(q: Queryable, developerId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow | undefined> {
  const { rows } = await q.query<DeliveryRow>(
    `UPDATE webhook_deliveries SET status = 'replayed', replay_count = replay_count + 1, completed_at = NULL, updated_at = now()
     WHERE developer_id = $1 AND endpoint_id = $2 AND id = $3 AND status = 'dead'
     RETURNING ${DELIVERY_COLUMNS}`,
    [developerId, endpointId, deliveryId],
  );
  return rows[0];
}
