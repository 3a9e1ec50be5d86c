import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';

/**
 * Event types the platform emits. The full registry (34 types, with reserved ones) comes with
 * webhook delivery; domains record events through `recordEvent` inside their own transaction.
 */
export type EventType =
  | 'customer.created'
  | 'customer.archived'
  | 'customer.hard_deleted'
  | 'customer.budget_exceeded'
  | 'customer.rate_limit_exceeded'
  | 'wallet.low'
  | 'wallet.empty'
  | 'chat.completion.finished'
  | 'request.failed_after_retry';

export interface RecordedEvent {
  id: string;
  type: EventType;
  created_at: Date;
}

/** Writes an event row; call it with the transaction that makes the change, never after it. */
export async function recordEvent(q: Queryable, developerId: string, type: EventType, data: Record<string, unknown>): Promise<RecordedEvent> {
  const { rows } = await q.query<RecordedEvent>(
    'INSERT INTO outbox_events (id, developer_id, type, data) VALUES ($1, $2, $3, $4) RETURNING id, type, created_at',
    [newId('evt_'), developerId, type, JSON.stringify(data)],
  );
  return rows[0]!;
}
