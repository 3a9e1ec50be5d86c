import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { requireNotSuspended } from './metering.js';
import { insertEvent, recentEventsInReach, type EventRow } from './repository.js';

/** Activity events: POST /v1/log appends one to a node (member), POST /v1/events reads recent ones in the reach (reader). */
export async function logEvent(db: Queryable, credential: HiveCredential, input: { node: string; kind: string; text: string; data?: Record<string, unknown> }) {
  await requireNotSuspended(db, credential.orgId);
  const node = await nodeWithRole(db, credential, input.node, 'member');
  const row = await insertEvent(db, { id: newId('evt_'), node, kind: input.kind, text: input.text, data: input.data ?? null, personId: credential.personId, tokenId: credential.tokenId });
  return formatEvent(row);
}

export async function recentEvents(db: Queryable, credential: HiveCredential, input: { node?: string; kinds?: string[]; limit: number; since?: string }) {
  const path = input.node ? (await nodeWithRole(db, credential, input.node, 'reader')).path : null;
  const rows = await recentEventsInReach(db, credential.tokenId, { path, kinds: input.kinds ?? null, since: input.since ?? null, limit: input.limit });
  return { object: 'list', data: rows.map(formatEvent) };
}

function formatEvent(row: EventRow) {
  return {
    id: row.id,
    node: { id: row.node_id, path: row.node_path },
    kind: row.kind,
    text: row.text,
    data: row.data,
    person_id: row.person_id,
    token_id: row.token_id,
    created_at: row.created_at.toISOString(),
  };
}
