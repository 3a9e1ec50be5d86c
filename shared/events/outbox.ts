import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import type { EventType } from './types.js';

/** Event types come from the one registry of shared/events/types.ts (34 types, some reserved). */
export type { EventType };

export interface RecordedEvent {
  id: string;
  type: EventType;
  created_at: Date;
}

/** Writes an event row; call it with the transaction that makes the change, never after it. */
export async function recordEvent(
  q: Queryable,
  developerId: string,
  type: EventType,
  data: Record<string, unknown>,
  options: {
    /** Already relayed: the caller makes its deliveries itself (a webhook test goes to one endpoint only). */
    relayed?: boolean;
  } = {},
): Promise<RecordedEvent> {
  const { rows } = await q.query<RecordedEvent>(
    `INSERT INTO outbox_events (id, developer_id, type, data, relayed_at) VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)
     RETURNING id, type, created_at`,
    [newId('evt_'), developerId, type, JSON.stringify(data), options.relayed ?? false],
  );
  return rows[0]!;
}
