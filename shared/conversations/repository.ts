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

/** A developer's conversation by id, whichever customer's: the caller compares customer_id with the customer it resolved (read side by side). */
export async function findConversation(q: Queryable, developerId: string, id: string): Promise<ConversationRow | undefined> {
  const { rows } = await q.query<ConversationRow>({ name: 'conversation-by-id', text: `SELECT * FROM conversations WHERE developer_id = $1 AND id = $2 AND deleted_at IS NULL`, values: [developerId, id] });
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

export type TurnBeginning = { verdict: 'begun'; fence: number; history: Pick<MessageRow, 'role' | 'content'>[] } | { verdict: 'archived' | 'full' | 'locked' | 'missing' };

/** Which conversation a turn is for: the developer's, of the customer the path names, within a client token's customer. */
export interface TurnTarget {
  developerId: string;
  conversationId: string;
  customer: { id: string } | { externalId: string };
  pinnedCustomerId: string | null;
}

/**
 * A turn begins, in one statement: the conversation is found (the developer's, of the named
 * customer), its row locked, and unless it is archived, full, or held by a turn whose lock has
 * not lapsed, the row takes the lock (locked_until) with the next fence, which the turn's end
 * must present, and the history comes back (the messages in order, the fields a chat call
 * takes). The row is the lock, so it holds across API replicas and never disagrees with the
 * status reads show. Nothing but the lock is written, and its commit does not wait for the WAL
 * to reach disk: a lock lost in a crash is a lock released.
 */
export async function beginTurn(q: Queryable, target: TurnTarget, maxMessages: number, lockMs: number): Promise<TurnBeginning> {
  const { rows } = await q.query<{ verdict: TurnBeginning['verdict']; fence: string; history: Pick<MessageRow, 'role' | 'content'>[] | null }>({
    name: 'conversation-begin-turn',
    text: `WITH conversation AS (
       SELECT c.status, c.message_count, c.last_fence, c.locked_until
         FROM conversations c JOIN customers k ON k.id = c.customer_id
        WHERE c.developer_id = $1 AND c.id = $2 AND c.deleted_at IS NULL AND (k.id = $3 OR k.external_id = $4) AND ($5::text IS NULL OR k.id = $5)
          FOR UPDATE OF c
     ),
     verdict AS (
       SELECT CASE WHEN status = 'archived' THEN 'archived' WHEN message_count + 2 > $6 THEN 'full' WHEN locked_until > now() THEN 'locked' ELSE 'begun' END AS verdict,
              last_fence + 1 AS fence
         FROM conversation
     ),
     turn AS (
       UPDATE conversations c SET last_fence = v.fence, locked_until = now() + make_interval(secs => $7::float8 / 1000), updated_at = now()
         FROM verdict v WHERE c.id = $2 AND v.verdict = 'begun'
     )
     SELECT v.verdict, v.fence, set_config('synchronous_commit', 'off', true),
            CASE WHEN v.verdict = 'begun' THEN coalesce((SELECT json_agg(json_build_object('role', m.role, 'content', m.content) ORDER BY m.seq) FROM conversation_messages m WHERE m.conversation_id = $2), '[]') END AS history
       FROM verdict v`,
    values: [target.developerId, target.conversationId, 'id' in target.customer ? target.customer.id : null, 'externalId' in target.customer ? target.customer.externalId : null, target.pinnedCustomerId, maxMessages, lockMs],
  });
  const row = rows[0];
  if (!row) return { verdict: 'missing' };
  return row.verdict === 'begun' ? { verdict: 'begun', fence: Number(row.fence), history: row.history! } : { verdict: row.verdict };
}

/**
 * The turn's end, in one statement: the user's message and the reply appended together and the
 * lock released, if the turn still holds `fence`; nothing is written (undefined) when a later turn
 * took the conversation over. A turn is all or nothing: one that ends without a reply leaves no
 * message. The reply is what this returns.
 */
export async function completeTurn(q: Queryable, id: string, fence: number, user: { id: string; content: string }, reply: Pick<MessageRow, 'id' | 'content' | 'model' | 'usage'>): Promise<MessageRow | undefined> {
  const { rows } = await q.query<MessageRow>({
    name: 'conversation-complete-turn',
    text: `WITH conversation AS (
       UPDATE conversations SET message_count = message_count + 2, locked_until = NULL, updated_at = now()
        WHERE id = $1 AND last_fence = $2 RETURNING message_count
     ),
     messages AS (
       INSERT INTO conversation_messages (id, conversation_id, seq, role, content, model, usage)
       SELECT $3, $1, message_count - 1, 'user', $4, NULL, NULL FROM conversation
       UNION ALL
       SELECT $5, $1, message_count, 'assistant', $6, $7, $8::jsonb FROM conversation
       RETURNING *
     )
     SELECT * FROM messages WHERE role = 'assistant'`,
    values: [id, fence, user.id, user.content, reply.id, reply.content, reply.model, reply.usage === null ? null : JSON.stringify(reply.usage)],
  });
  return rows[0];
}

/** The turn ended without a reply: the lock is released (if this turn still holds the fence), and nothing else changes. */
export async function endTurn(q: Queryable, id: string, fence: number): Promise<void> {
  await q.query(`UPDATE conversations SET locked_until = NULL WHERE id = $1 AND last_fence = $2`, [id, fence]);
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
