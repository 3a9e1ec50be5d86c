import { toSql } from 'pgvector';
import type { Db } from '../../shared/db/pool.js';
import { deterministicEmbedding } from '../../shared/emulator/embeddings.js';
import { embeddingText } from '../../shared/hive/embedding.js';
import { MEMORY_KINDS, normaliseTitle } from '../../shared/hive/schemas.js';
import { newId } from '../../shared/ids.js';
import { mulberry32, topicText, TOPICS } from './corpus.js';

/**
 * Memories of a hive organisation written straight into hive.memories, for the hive bench: short
 * notes (a title of a few words, a body of a few sentences) on the corpus's made-up topics, each
 * node keeping mostly to one topic as a project's notes do, written over the last 120 days, 2 %
 * pinned, with the vector the worker would store (the emulator's embedding of title and body with
 * HIVE_EMBEDDING_MODEL), so recall finds them by text and by meaning at once.
 */
const DAY_MS = 86_400_000;
const LOAD_BATCH = 1_000;
/** Kinds a bench memory takes (guardrails and axioms need authority the bench person lacks, and are rare). */
const KINDS = MEMORY_KINDS.filter((kind) => kind !== 'guardrail' && kind !== 'axiom');
const SCOPES = ['general', 'conventions', 'decisions', 'release', 'testing', 'architecture'];

export interface HiveLoadTarget {
  orgId: string;
  personId: string;
  tokenId: string;
  /** The nodes to fill, in order; memory i goes to node i mod length. */
  nodeIds: string[];
  /** The catalog id memories are embedded with (embedding_model), the upstream model name, its dimensions. */
  model: { id: string; upstream: string; dims: number };
}

/** The topic a node keeps to, by its place in the list. */
export const nodeTopic = (index: number): number => index % TOPICS;

/** A memory's title and body on a topic. */
export function memoryText(random: () => number, topic: number): { title: string; body: string } {
  const title = topicText(random, topic, 3 + Math.floor(random() * 6));
  const sentences = 2 + Math.floor(random() * 4);
  const body = Array.from({ length: sentences }, () => {
    const sentence = topicText(random, random() < 0.8 ? topic : Math.floor(random() * TOPICS), 6 + Math.floor(random() * 14));
    return `${sentence[0]!.toUpperCase()}${sentence.slice(1)}.`;
  }).join(' ');
  return { title: `${title[0]!.toUpperCase()}${title.slice(1)}`, body };
}

/** Writes `count` memories over the target's nodes in batches; then VACUUM ANALYZE, as autovacuum would. */
export async function loadMemories(db: Db, target: HiveLoadTarget, count: number, now = Date.now()): Promise<{ seconds: number }> {
  const random = mulberry32(29);
  const started = performance.now();
  for (let from = 0; from < count; from += LOAD_BATCH) {
    const to = Math.min(count, from + LOAD_BATCH);
    const rows = { id: [] as string[], node: [] as string[], scope: [] as string[], title: [] as string[], key: [] as string[], body: [] as string[], kind: [] as string[], pinned: [] as boolean[], created: [] as Date[], updated: [] as Date[], embedding: [] as string[] };
    for (let index = from; index < to; index++) {
      const node = index % target.nodeIds.length;
      const topic = random() < 0.7 ? nodeTopic(node) : Math.floor(random() * TOPICS);
      const { title, body } = memoryText(random, topic);
      const created = now - random() * 120 * DAY_MS;
      rows.id.push(newId('mem_'));
      rows.node.push(target.nodeIds[node]!);
      rows.scope.push(SCOPES[Math.floor(random() * SCOPES.length)]!);
      // A title can repeat on a node by chance; the index keeps identities apart.
      rows.title.push(`${title} ${index}`);
      rows.key.push(normaliseTitle(`${title} ${index}`));
      rows.body.push(body);
      rows.kind.push(KINDS[Math.floor(random() ** 1.5 * KINDS.length)]!);
      rows.pinned.push(random() < 0.02);
      rows.created.push(new Date(created));
      rows.updated.push(new Date(created + random() * (now - created)));
      rows.embedding.push(toSql(deterministicEmbedding(target.model.upstream, embeddingText({ title: `${title} ${index}`, body }), target.model.dims)));
    }
    await db.query(
      `INSERT INTO hive.memories (id, org_id, node_id, scope, title, title_key, body, kind, pinned, created_at, created_by, created_token, updated_at, updated_by, updated_token,
                                  embedding, embedding_model, embedded_version)
       SELECT u.id, $1, u.node_id, u.scope, u.title, u.title_key, u.body, u.kind, u.pinned, u.created_at, $2, $3, u.updated_at, $2, $3, u.embedding::vector, $4, 1
         FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::timestamptz[], $14::timestamptz[], $15::text[])
           AS u(id, node_id, scope, title, title_key, body, kind, pinned, created_at, updated_at, embedding)`,
      [target.orgId, target.personId, target.tokenId, target.model.id, rows.id, rows.node, rows.scope, rows.title, rows.key, rows.body, rows.kind, rows.pinned, rows.created, rows.updated, rows.embedding],
    );
  }
  await db.query('VACUUM (ANALYZE) hive.memories');
  return { seconds: (performance.now() - started) / 1000 };
}
