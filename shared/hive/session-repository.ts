import type { Queryable } from '../db/pool.js';
import { MEMORY_COLUMNS, type MemoryRow } from './memory-repository.js';
import { REACH_CTE } from './repository.js';

/**
 * SQL of briefs and sessions. The brief's reads start from the token's reach (REACH_CTE, `$1`
 * the token id): a memory, task or event outside it is never loaded.
 */

/**
 * Live, current memories that bear on a node: those on it, on its ancestors (a guardrail of the
 * organisation holds in every project) and below it. `section` picks guardrails and axioms,
 * preferences, or the other pinned memories; nearest node first, then most recently written.
 */
export async function briefMemories(db: Queryable, tokenId: string, nodePath: string, section: 'guardrails' | 'preferences' | 'pins', limit: number): Promise<MemoryRow[]> {
  const where = {
    guardrails: `m.kind IN ('guardrail', 'axiom')`,
    preferences: `m.kind = 'preference'`,
    pins: `m.pinned AND m.kind NOT IN ('guardrail', 'axiom', 'preference')`,
  }[section];
  const { rows } = await db.query<MemoryRow>(
    `WITH ${REACH_CTE}
     SELECT ${MEMORY_COLUMNS}, reach.rank
       FROM hive.memories m JOIN reach ON reach.node_id = m.node_id JOIN hive.nodes n ON n.id = m.node_id
      WHERE m.forgotten_at IS NULL AND m.superseded_by IS NULL AND ${where}
        AND (n.path = $2 OR starts_with($2, n.path || '/') OR starts_with(n.path, $2 || '/'))
      ORDER BY m.kind = 'axiom' DESC, n.depth ASC, m.updated_at DESC, m.id
      LIMIT $3`,
    [tokenId, nodePath, limit],
  );
  return rows;
}

export async function insertSession(db: Queryable, session: { id: string; orgId: string; nodeId: string; tokenId: string; personId: string | null }): Promise<Date> {
  const { rows } = await db.query<{ started_at: Date }>(
    `INSERT INTO hive.sessions (id, org_id, node_id, token_id, person_id) VALUES ($1, $2, $3, $4, $5) RETURNING started_at`,
    [session.id, session.orgId, session.nodeId, session.tokenId, session.personId],
  );
  return rows[0]!.started_at;
}

export interface SessionRow {
  id: string;
  node_id: string;
  node_path: string;
  token_id: string;
  started_at: Date;
  ended_at: Date | null;
}

/** A session of this token, locked for its ending; another token's session is not there. */
export async function sessionOfTokenForUpdate(db: Queryable, tokenId: string, id: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `SELECT s.id, s.node_id, n.name_path AS node_path, s.token_id, s.started_at, s.ended_at
       FROM hive.sessions s JOIN hive.nodes n ON n.id = s.node_id
      WHERE s.id = $2 AND s.token_id = $1 FOR UPDATE OF s`,
    [tokenId, id],
  );
  return rows[0];
}

export async function endSession(db: Queryable, id: string, summary: string | null): Promise<Date> {
  const { rows } = await db.query<{ ended_at: Date }>(`UPDATE hive.sessions SET ended_at = now(), summary = $2 WHERE id = $1 RETURNING ended_at`, [id, summary]);
  return rows[0]!.ended_at;
}

export interface SessionWrite {
  what: 'memory' | 'event' | 'task' | 'trait';
  action: string;
  id: string;
  node_path: string | null;
  title: string;
  at: Date;
}

/**
 * What a session's token wrote from the session's start to its end: memories created, refined
 * (each version it wrote), verified and forgotten; events; tasks added and closed; trait evidence.
 * Oldest first. The bounds are read from the session row itself, at the database's precision.
 */
export async function writesOfSession(db: Queryable, sessionId: string): Promise<SessionWrite[]> {
  const { rows } = await db.query<SessionWrite>(
    `WITH s AS (SELECT token_id AS t, started_at AS f, coalesce(ended_at, now()) AS u FROM hive.sessions WHERE id = $1),
     window_writes AS (
       SELECT 'memory' AS what, 'created' AS action, m.id, m.node_id, m.title, m.created_at AS at
         FROM hive.memories m CROSS JOIN s WHERE m.created_token = s.t AND m.created_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'memory', 'refined', m.id, m.node_id, m.title, m.updated_at
         FROM hive.memories m CROSS JOIN s WHERE m.updated_token = s.t AND m.updated_at BETWEEN s.f AND s.u AND m.version > 1
       UNION ALL
       SELECT 'memory', 'refined', v.memory_id, m.node_id, v.title, v.written_at
         FROM hive.memory_versions v JOIN hive.memories m ON m.id = v.memory_id CROSS JOIN s
        WHERE v.written_token = s.t AND v.written_at BETWEEN s.f AND s.u AND v.version > 1
       UNION ALL
       SELECT 'memory', 'verified', m.id, m.node_id, m.title, m.verified_at
         FROM hive.memories m CROSS JOIN s WHERE m.verified_token = s.t AND m.verified_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'memory', 'forgotten', m.id, m.node_id, m.title, m.forgotten_at
         FROM hive.memories m CROSS JOIN s WHERE m.forgotten_token = s.t AND m.forgotten_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'event', 'logged', e.id, e.node_id, e.text, e.created_at
         FROM hive.events e CROSS JOIN s WHERE e.token_id = s.t AND e.created_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'task', 'added', t.id, t.node_id, t.title, t.created_at
         FROM hive.tasks t CROSS JOIN s WHERE t.created_token = s.t AND t.created_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'task', t.status, t.id, t.node_id, t.title, t.closed_at
         FROM hive.tasks t CROSS JOIN s WHERE t.closed_token = s.t AND t.closed_at BETWEEN s.f AND s.u
       UNION ALL
       SELECT 'trait', 'evidence', tr.id, NULL, tr.trait, ev.recorded_at
         FROM hive.trait_evidence ev JOIN hive.traits tr ON tr.id = ev.trait_id CROSS JOIN s WHERE ev.recorded_token = s.t AND ev.recorded_at BETWEEN s.f AND s.u
     )
     SELECT DISTINCT ON (w.what, w.action, w.id) w.what, w.action, w.id, n.name_path AS node_path, w.title, w.at
       FROM window_writes w LEFT JOIN hive.nodes n ON n.id = w.node_id
      ORDER BY w.what, w.action, w.id, w.at DESC`,
    [sessionId],
  );
  return rows.sort((a, b) => a.at.getTime() - b.at.getTime() || a.id.localeCompare(b.id));
}
