import { withTransaction, type Db } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { logEvent } from './activity.js';
import { hiveError } from './errors.js';
import type { MemoryRow } from './memory-repository.js';
import { recentEventsInReach, type EventRow } from './repository.js';
import * as repo from './session-repository.js';
import { listTasks } from './tasks.js';

/**
 * The session brief (POST /v1/brief): what an agent starting work on a node should know, in order
 * of precedence: guardrails and axioms, preferences, pinned memories, tasks due, its inbox (open
 * tasks assigned to the person), recent activity. It fits a token budget (about four characters a
 * token): sections are filled in that order, an item that does not fit is cut, and `cut` names
 * every one left out. The brief opens a session; POST /v1/session/end reports what it wrote.
 */
const SECTION_FETCH = 100;
const RECENT_EVENTS = 30;
const CHARS_PER_TOKEN = 4;

export const BRIEF_SECTIONS = ['guardrails', 'preferences', 'pins', 'due', 'inbox', 'recent'] as const;
type Section = (typeof BRIEF_SECTIONS)[number];

interface BriefItem {
  id: string;
  line: string;
  data: Record<string, unknown>;
}

export async function brief(db: Db, credential: HiveCredential, input: { node: string; budget_tokens: number; session: boolean }) {
  const node = await nodeWithRole(db, credential, input.node, 'reader');
  const [guardrails, preferences, pins, due, inbox, recent] = await Promise.all([
    repo.briefMemories(db, credential.tokenId, node.path, 'guardrails', SECTION_FETCH),
    repo.briefMemories(db, credential.tokenId, node.path, 'preferences', SECTION_FETCH),
    repo.briefMemories(db, credential.tokenId, node.path, 'pins', SECTION_FETCH),
    listTasks(db, credential, { node: node.id, statuses: ['open'], dueBy: new Date(), limit: SECTION_FETCH }),
    credential.personId ? listTasks(db, credential, { statuses: ['open'], assignee: 'me', dueBy: null, limit: SECTION_FETCH }) : Promise.resolve({ data: [] }),
    recentEventsInReach(db, credential.tokenId, { path: node.path, kinds: null, since: null, limit: RECENT_EVENTS }),
  ]);
  const dueIds = new Set(due.data.map((task) => task.id));
  const candidates: Record<Section, BriefItem[]> = {
    guardrails: guardrails.map(memoryItem),
    preferences: preferences.map(memoryItem),
    pins: pins.map(memoryItem),
    due: due.data.map((task) => ({ id: task.id, line: `- ${task.title} (due ${task.due_at}, ${task.node.path})`, data: task })),
    inbox: inbox.data.filter((task) => !dueIds.has(task.id)).map((task) => ({ id: task.id, line: `- ${task.title} (${task.node.path}${task.due_at ? `, due ${task.due_at}` : ''})`, data: task })),
    recent: recent.map(eventItem),
  };

  // Headings count against the budget too, so the answer's text is what was budgeted.
  let used = 0;
  const sections = {} as Record<Section, Record<string, unknown>[]>;
  const cut: { section: Section; count: number; ids: string[] }[] = [];
  const text: string[] = [];
  for (const section of BRIEF_SECTIONS) {
    sections[section] = [];
    const heading = `## ${section}`;
    const lines: string[] = [];
    const dropped: string[] = [];
    for (const item of candidates[section]) {
      const cost = tokensOf(item.line) + (lines.length === 0 ? tokensOf(heading) : 0);
      if (used + cost > input.budget_tokens) {
        dropped.push(item.id);
        continue;
      }
      used += cost;
      lines.push(item.line);
      sections[section].push(item.data);
    }
    if (lines.length > 0) text.push(heading, ...lines);
    if (dropped.length > 0) cut.push({ section, count: dropped.length, ids: dropped });
  }

  const session = input.session ? await openSession(db, credential, node) : null;
  return {
    object: 'brief',
    node: { id: node.id, path: node.name_path },
    session,
    budget_tokens: input.budget_tokens,
    used_tokens: used,
    sections,
    cut,
    text: text.join('\n'),
  };
}

async function openSession(db: Db, credential: HiveCredential, node: { id: string; org_id: string }) {
  const id = newId('ses_');
  const startedAt = await repo.insertSession(db, { id, orgId: node.org_id, nodeId: node.id, tokenId: credential.tokenId, personId: credential.personId });
  return { id, started_at: startedAt.toISOString() };
}

/**
 * POST /v1/session/end: what the session's token wrote since the brief that opened it (memories
 * created, refined, verified, forgotten; events; tasks added and closed; trait evidence), and the
 * session closed. A summary is kept on the session and logged as a `session.end` event on its
 * node, so the next brief's recent activity shows it. A session ends once (409 after).
 */
export async function endSession(db: Db, credential: HiveCredential, input: { session: string; summary?: string }) {
  const ended = await withTransaction(db, async (client) => {
    const session = await repo.sessionOfTokenForUpdate(client, credential.tokenId, input.session);
    if (!session) throw hiveError(404, `No session ${input.session} of this token.`);
    if (session.ended_at) throw hiveError(409, `Session ${session.id} already ended at ${session.ended_at.toISOString()}.`);
    // The summary becomes an event on the node, which needs member there: refused before anything ends.
    if (input.summary) await nodeWithRole(client, credential, session.node_id, 'member');
    const endedAt = await repo.endSession(client, session.id, input.summary ?? null);
    return { session, endedAt };
  });
  const writes = await repo.writesOfSession(db, ended.session.id);
  const counts: Record<string, number> = {};
  for (const write of writes) counts[`${write.what}.${write.action}`] = (counts[`${write.what}.${write.action}`] ?? 0) + 1;
  const summaryEvent = input.summary
    ? await logEvent(db, credential, { node: ended.session.node_id, kind: 'session.end', text: input.summary, data: { session: ended.session.id, counts } })
    : null;
  return {
    object: 'session',
    id: ended.session.id,
    node: { id: ended.session.node_id, path: ended.session.node_path },
    started_at: ended.session.started_at.toISOString(),
    ended_at: ended.endedAt.toISOString(),
    counts,
    wrote: writes.map((write) => ({ what: write.what, action: write.action, id: write.id, node: write.node_path, title: write.title, at: write.at.toISOString() })),
    summary_event: summaryEvent?.id ?? null,
  };
}

const tokensOf = (line: string): number => Math.ceil((line.length + 1) / CHARS_PER_TOKEN);

function memoryItem(memory: MemoryRow): BriefItem {
  const body = memory.body ? `: ${memory.body}` : '';
  return {
    id: memory.id,
    line: `- [${memory.kind}] ${memory.title}${body} (${memory.node_path}, ${memory.scope}, ${memory.id})`,
    data: { id: memory.id, node: { id: memory.node_id, path: memory.node_path }, scope: memory.scope, title: memory.title, body: memory.body, kind: memory.kind, pinned: memory.pinned, updated_at: memory.updated_at.toISOString() },
  };
}

function eventItem(event: EventRow): BriefItem {
  return {
    id: event.id,
    line: `- ${event.created_at.toISOString()} [${event.kind}] ${event.text} (${event.node_path})`,
    data: { id: event.id, node: { id: event.node_id, path: event.node_path }, kind: event.kind, text: event.text, created_at: event.created_at.toISOString() },
  };
}

