import type { Queryable } from '../db/pool.js';
import type { CursorPosition } from '../pagination.js';

/** SQL of conversations and their messages; every lookup names the developer and the customer. */
export interface ConversationRow {
  id: string;
  developer_id: string;
  customer_id: string;
  status: 'active' | 'archived';
  metadata: Record<string, string> | null;
  message_count: number;
  last_fence: string;
  locked_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface MessageRow {
  id: string;
  conversation_id: string;
  seq: number;
  role: 'user' | 'assistant';
  content: string;
  model: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  created_at: Date;
}

export async function insertConversation(q: Queryable, row: { id: string; developerId: string; customerId: string; metadata: Record<string, string> | null }): Promise<ConversationRow> {
  const { rows } = await q.query<ConversationRow>(
    `INSERT INTO conversations (id, developer_id, customer_id, metadata) VALUES ($1, $2, $3, $4) RETURNING *`,
    [row.id, row.developerId, row.customerId, row.metadata === null ? null : JSON.stringify(row.metadata)],
  );
  return rows[0]!;
}

export async function findConversation(q: Queryable, developerId: string, customerId: string, id: string): Promise<ConversationRow | undefined> {
  const { rows } = await q.query<ConversationRow>(
    `SELECT * FROM conversations WHERE developer_id = $1 AND customer_id = $2 AND id = $3 AND deleted_at IS NULL`,
    [developerId, customerId, id],
  );
  return rows[0];
}

export async function listConversations(q: Queryable, developerId: string, customerId: string, page: { limit: number; after: CursorPosition | undefined }, status: 'active' | 'locked' | 'archived' | undefined): Promise<ConversationRow[]> {
  const { rows } = await q.query<ConversationRow>(
    `SELECT * FROM conversations
     WHERE developer_id = $1 AND customer_id = $2 AND deleted_at IS NULL
       AND ($3::text IS NULL
            OR ($3 = 'locked' AND locked_until > now())
            OR ($3 = 'active' AND status = 'active' AND (locked_until IS NULL OR locked_until <= now()))
            OR ($3 = 'archived' AND status = 'archived'))
       AND ($4::text IS NULL OR (created_at, id) < (SELECT c.created_at, c.id FROM conversations c WHERE c.customer_id = $2 AND c.id = $4))
     ORDER BY created_at DESC, id DESC LIMIT $5`,
    [developerId, customerId, status ?? null, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}

export async function updateConversation(q: Queryable, id: string, patch: { status?: 'active' | 'archived'; metadata?: Record<string, string> | null }): Promise<ConversationRow> {
  const { rows } = await q.query<ConversationRow>(
    `UPDATE conversations SET status = coalesce($2, status), metadata = CASE WHEN $3 THEN $4::jsonb ELSE metadata END, updated_at = now()
     WHERE id = $1 RETURNING *`,
    [id, patch.status ?? null, patch.metadata !== undefined, patch.metadata == null ? null : JSON.stringify(patch.metadata)],
  );
  return rows[0]!;
}

export async function deleteConversation(q: Queryable, id: string): Promise<void> {
  await q.query(`UPDATE conversations SET deleted_at = now() WHERE id = $1`, [id]);
}

/**
 * A turn begins, in one statement: the row is locked, and unless the conversation is archived,
 * full, or a newer turn holds a later fence, the user's message is appended and the row records
 * the turn's fence and lock. One statement rather than five in a transaction (BEGIN, read, insert,
 * update, COMMIT): a turn's own time is what it adds to the chat call. 'missing' when the row has gone.
 */
export async function beginTurn(q: Queryable, id: string, fence: number, message: { id: string; content: string }, maxMessages: number, lockMs: number): Promise<'begun' | 'archived' | 'full' | 'fenced' | 'missing'> {
  const { rows } = await q.query<{ verdict: 'begun' | 'archived' | 'full' | 'fenced' }>(
    `WITH conversation AS (SELECT status, message_count, last_fence FROM conversations WHERE id = $1 FOR UPDATE),
     verdict AS (
       SELECT CASE WHEN status = 'archived' THEN 'archived' WHEN message_count + 2 > $5 THEN 'full' WHEN last_fence >= $2 THEN 'fenced' ELSE 'begun' END AS verdict, message_count
         FROM conversation
     ),
     message AS (
       INSERT INTO conversation_messages (id, conversation_id, seq, role, content)
       SELECT $3, $1, message_count + 1, 'user', $4 FROM verdict WHERE verdict = 'begun'
     ),
     turn AS (
       UPDATE conversations SET message_count = message_count + 1, last_fence = $2, locked_until = now() + make_interval(secs => $6::float8 / 1000), updated_at = now()
        WHERE id = $1 AND EXISTS (SELECT 1 FROM verdict WHERE verdict = 'begun')
     )
     SELECT verdict FROM verdict`,
    [id, fence, message.id, message.content, maxMessages, lockMs],
  );
  return rows[0]?.verdict ?? 'missing';
}

/** The reply of the turn holding `fence`, in one statement; nothing is written (undefined) when a newer turn took the conversation over. */
export async function appendReply(q: Queryable, id: string, fence: number, message: Omit<MessageRow, 'conversation_id' | 'seq' | 'created_at'>): Promise<MessageRow | undefined> {
  const { rows } = await q.query<MessageRow>(
    `WITH conversation AS (SELECT message_count FROM conversations WHERE id = $1 AND last_fence = $2 FOR UPDATE),
     reply AS (
       INSERT INTO conversation_messages (id, conversation_id, seq, role, content, model, usage)
       SELECT $3, $1, message_count + 1, 'assistant', $4, $5, $6 FROM conversation RETURNING *
     ),
     counted AS (
       UPDATE conversations SET message_count = message_count + 1, locked_until = NULL, updated_at = now()
        WHERE id = $1 AND EXISTS (SELECT 1 FROM conversation)
     )
     SELECT * FROM reply`,
    [id, fence, message.id, message.content, message.model, message.usage === null ? null : JSON.stringify(message.usage)],
  );
  return rows[0];
}

/** The turn ended without a reply: the lock's mirror is cleared (if this turn still holds the fence). */
export async function endTurn(q: Queryable, id: string, fence: number): Promise<void> {
  await q.query(`UPDATE conversations SET locked_until = NULL WHERE id = $1 AND last_fence = $2`, [id, fence]);
}

export async function history(q: Queryable, id: string): Promise<MessageRow[]> {
  const { rows } = await q.query<MessageRow>(`SELECT * FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq`, [id]);
  return rows;
}

export async function listMessages(q: Queryable, id: string, page: { limit: number; after: CursorPosition | undefined }, order: 'asc' | 'desc'): Promise<MessageRow[]> {
  const [cmp, dir] = order === 'asc' ? ['>', 'ASC'] : ['<', 'DESC'];
  const { rows } = await q.query<MessageRow>(
    `SELECT * FROM conversation_messages WHERE conversation_id = $1
       AND ($2::text IS NULL OR seq ${cmp} (SELECT m.seq FROM conversation_messages m WHERE m.conversation_id = $1 AND m.id = $2))
     ORDER BY seq ${dir} LIMIT $3`,
    [id, page.after?.id ?? null, page.limit + 1],
  );
  return rows;
}
