import type { HiveServices } from '../composition/hive.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, requireRank, type HiveCredential } from './access.js';
import { queueEmbedding } from './embedding.js';
import { hiveError } from './errors.js';
import * as repo from './memory-repository.js';
import { chargeRemember, requireNotSuspended } from './metering.js';
import { normaliseTitle, type MemoryKind } from './schemas.js';

/**
 * Memories: identity is node + scope + normalised title. Remember on an identity that exists
 * refines it (a new version, the old one kept), never duplicates; guards refuse rather than
 * overwrite. Every write queues the embedding of the version it made.
 */
type Hive = Pick<HiveServices, 'db' | 'queues' | 'logger' | 'config'>;

export interface RememberInput {
  node: string;
  scope: string;
  title: string;
  body: string;
  kind: MemoryKind;
  pinned?: boolean;
  source?: string;
  supersedes?: string[];
  force?: boolean;
}

export async function remember(hive: Hive, credential: HiveCredential, input: RememberInput) {
  const node = await nodeWithRole(hive.db, credential, input.node, 'member');
  requireAuthority(credential, input.kind);
  const by = authorship(credential, input.source);
  const identity = { nodeId: node.id, scope: input.scope, titleKey: normaliseTitle(input.title) };
  const content = { scope: input.scope, title: input.title, titleKey: identity.titleKey, body: input.body, kind: input.kind };

  // The write itself; a refinement or a new memory, or nothing when it is unchanged.
  const writeRemembered = async (client: Queryable) => {
    // Twice at most: a concurrent remember of the same identity may insert between our look and our insert.
    for (let attempt = 0; ; attempt++) {
      const existing = await repo.memoryByIdentityForUpdate(client, identity);
      if (existing) {
        requireAuthority(credential, existing.kind);
        const pinned = input.pinned ?? existing.pinned;
        if (existing.body === input.body && existing.title === input.title && existing.kind === input.kind && existing.pinned === pinned && !input.supersedes?.length) {
          return { result: 'unchanged' as const, id: existing.id, version: existing.version, wrote: false };
        }
        if (!input.force) await refuseOverwrite(client, existing);
        const version = await repo.writeNewVersion(client, existing.id, content, pinned, by);
        await supersede(client, credential, existing.id, input.supersedes);
        return { result: 'refined' as const, id: existing.id, version, wrote: true };
      }
      const id = newId('mem_');
      if (await repo.insertMemory(client, { id, orgId: node.org_id, nodeId: node.id, ...content, pinned: input.pinned ?? false }, by)) {
        await supersede(client, credential, id, input.supersedes);
        return { result: 'created' as const, id, version: 1, wrote: true };
      }
      if (attempt > 0) throw new Error(`memory identity ${node.id}/${identity.scope}/${identity.titleKey} neither found nor insertable`);
    }
  };
  // An empty wallet refuses before anything is written (402); the write never touches the wallet's
  // row, and is charged after its commit, grouped with the other charges (metering.ts).
  await requireNotSuspended(hive.db, node.org_id);
  // A new identity with nothing to supersede is one statement, answered from the row it wrote
  // (round trips are most of a remember's cost); a refinement, or a remember that supersedes, is a
  // transaction.
  const created = input.supersedes?.length ? undefined : await repo.insertMemory(hive.db, { id: newId('mem_'), orgId: node.org_id, nodeId: node.id, ...content, pinned: input.pinned ?? false }, by);
  const outcome = created ? { result: 'created' as const, id: created.id, version: 1, wrote: true } : await withTransaction(hive.db, writeRemembered);
  await chargeRemember(hive.db, hive.config, node.org_id, outcome.id).catch((error: unknown) => {
    // The memory is written and stays so: answering with an error would misreport it.
    hive.logger.error({ err: error, org: node.org_id, memory: outcome.id }, 'hive remember written but its charge failed');
  });
  if (outcome.wrote) await queueEmbedding(hive.queues, { memoryId: outcome.id, version: outcome.version }, hive.logger);
  const memory = created
    ? describeMemory(created, [], [], new Map(credential.personId && credential.email ? [[credential.personId, credential.email]] : []))
    : await getMemory(hive.db, credential, outcome.id);
  return { result: outcome.result, memory };
}

/** One memory by id with its provenance and earlier versions; a tombstone after forget. */
export async function getMemory(db: Queryable, credential: HiveCredential, id: string) {
  const memory = await readable(db, credential, id);
  const [versions, supersedes] = memory.forgotten_at ? [[], []] : await Promise.all([repo.versionsOf(db, id), repo.supersededIds(db, id)]);
  const people = [memory.created_by, memory.updated_by, memory.verified_by, memory.forgotten_by, ...versions.map((version) => version.written_by)];
  const emails = await repo.emailsOf(db, [...new Set(people.filter((person): person is string => person !== null))]);
  return describeMemory(memory, versions, supersedes, emails);
}

/** A memory as get answers it: its provenance with who wrote each part, and its earlier versions. */
function describeMemory(memory: Omit<repo.MemoryRow, 'rank'>, versions: Awaited<ReturnType<typeof repo.versionsOf>>, supersedes: string[], emails: Map<string, string>) {
  const who = (person: string | null) => (person ? { id: person, email: emails.get(person) ?? null } : null);
  return {
    ...formatMemory(memory),
    supersedes,
    provenance: {
      created: { by: who(memory.created_by), token_id: memory.created_token, at: memory.created_at.toISOString(), source: memory.created_source },
      updated: { by: who(memory.updated_by), token_id: memory.updated_token, at: memory.updated_at.toISOString(), source: memory.updated_source },
      verified: memory.verified_at ? { by: who(memory.verified_by), token_id: memory.verified_token, at: memory.verified_at.toISOString() } : null,
      forgotten: memory.forgotten_at ? { by: who(memory.forgotten_by), token_id: memory.forgotten_token, at: memory.forgotten_at.toISOString() } : null,
    },
    versions: versions.map((version) => ({
      version: version.version,
      scope: version.scope,
      title: version.title,
      body: version.body,
      kind: version.kind,
      written: { by: who(version.written_by), token_id: version.written_token, at: version.written_at.toISOString(), source: version.source },
    })),
  };
}

export interface UpdateInput {
  id: string;
  scope?: string;
  title?: string;
  body?: string;
  kind?: MemoryKind;
  pinned?: boolean;
  source?: string;
}

/**
 * Edits one memory by id: content changes make a new version; moving it (title or scope) onto an
 * identity another memory holds is refused with 409. Pinning and unpinning are updates too.
 */
export async function updateMemory(hive: Hive, credential: HiveCredential, input: UpdateInput) {
  const outcome = await withTransaction(hive.db, async (client) => {
    await requireNotSuspended(client, credential.orgId);
    const memory = await writable(client, credential, input.id);
    requireAuthority(credential, memory.kind);
    if (input.kind) requireAuthority(credential, input.kind);
    const content = {
      scope: input.scope ?? memory.scope,
      title: input.title ?? memory.title,
      body: input.body ?? memory.body,
      kind: input.kind ?? memory.kind,
      titleKey: normaliseTitle(input.title ?? memory.title),
    };
    if (content.scope !== memory.scope || content.titleKey !== memory.title_key) {
      const holder = await repo.identityHolder(client, { nodeId: memory.node_id, scope: content.scope, titleKey: content.titleKey }, memory.id);
      if (holder) throw hiveError(409, `Another memory (${holder}) already has the title "${content.title}" in scope ${content.scope} of ${memory.node_path}.`);
    }
    const changed = content.scope !== memory.scope || content.title !== memory.title || content.body !== memory.body || content.kind !== memory.kind;
    if (changed) {
      const version = await repo.writeNewVersion(client, memory.id, content, input.pinned ?? memory.pinned, authorship(credential, input.source));
      return { version };
    }
    if (input.pinned !== undefined && input.pinned !== memory.pinned) await repo.setPinned(client, memory.id, input.pinned);
    return { version: undefined };
  }).catch((error: unknown) => {
    // A concurrent write took the identity between our check and our update.
    if ((error as { code?: string }).code === '23505') throw hiveError(409, 'Another memory already has that identity (node, scope and title).');
    throw error;
  });
  if (outcome.version) await queueEmbedding(hive.queues, { memoryId: input.id, version: outcome.version }, hive.logger);
  return getMemory(hive.db, credential, input.id);
}

/**
 * Forget: the memory's content, history and vector go and a tombstone stays (identity, who and
 * when). A pinned memory or one that supersedes others is refused unless `force`. Forgetting a
 * tombstone again answers the tombstone.
 */
export async function forgetMemory(db: HiveServices['db'], credential: HiveCredential, input: { id: string; force?: boolean }) {
  await withTransaction(db, async (client) => {
    await requireNotSuspended(client, credential.orgId);
    const memory = await loaded(client, credential, input.id, true);
    if (memory.forgotten_at) return;
    requireRank(memory.rank, 'member', `node ${memory.node_path}`);
    requireAuthority(credential, memory.kind);
    if (!input.force) {
      if (memory.pinned) throw hiveError(409, `Memory ${memory.id} is pinned; unpin it or forget with force.`);
      if (await repo.supersedesOthers(client, memory.id)) throw hiveError(409, `Memory ${memory.id} supersedes other memories; forget with force.`);
    }
    await repo.tombstone(client, memory.id, authorship(credential, undefined));
  });
  return getMemory(db, credential, input.id);
}

/** Marks a memory re-checked now (recall favours recently verified memories). */
export async function verifyMemory(db: HiveServices['db'], credential: HiveCredential, id: string) {
  await withTransaction(db, async (client) => {
    await requireNotSuspended(client, credential.orgId);
    const memory = await writable(client, credential, id);
    await repo.markVerified(client, memory.id, authorship(credential, undefined));
  });
  return getMemory(db, credential, id);
}

/** A memory as routes answer it. */
export function formatMemory(memory: Omit<repo.MemoryRow, 'rank'>) {
  const status = memory.forgotten_at ? 'forgotten' : memory.superseded_by ? 'superseded' : 'active';
  return {
    id: memory.id,
    node: { id: memory.node_id, path: memory.node_path },
    scope: memory.scope,
    title: memory.title,
    body: memory.forgotten_at ? null : memory.body,
    kind: memory.kind,
    pinned: memory.pinned,
    version: memory.version,
    status,
    superseded_by: memory.superseded_by,
    embedded: memory.embedded_version === memory.version,
    created_at: memory.created_at.toISOString(),
    updated_at: memory.updated_at.toISOString(),
    verified_at: memory.verified_at?.toISOString() ?? null,
    forgotten_at: memory.forgotten_at?.toISOString() ?? null,
  };
}

/** The memory if in the reach (a tombstone too); 404 otherwise, exactly as for an id that never existed. */
async function loaded(db: Queryable, credential: HiveCredential, id: string, lock = false): Promise<repo.MemoryRow> {
  const memory = await repo.memoryInReach(db, credential.tokenId, id, lock);
  if (!memory) throw hiveError(404, `No memory ${id}.`);
  return memory;
}

async function readable(db: Queryable, credential: HiveCredential, id: string): Promise<repo.MemoryRow> {
  const memory = await loaded(db, credential, id);
  requireRank(memory.rank, 'reader', `node ${memory.node_path}`);
  return memory;
}

/** A live memory the caller may write, locked for the write. */
async function writable(db: Queryable, credential: HiveCredential, id: string): Promise<repo.MemoryRow> {
  const memory = await loaded(db, credential, id, true);
  requireRank(memory.rank, 'member', `node ${memory.node_path}`);
  if (memory.forgotten_at) throw hiveError(409, `Memory ${id} was forgotten; remember it anew instead.`);
  return memory;
}

/** Guards of a refining remember: a pinned memory, or one that supersedes others, is not overwritten unless forced. */
async function refuseOverwrite(db: Queryable, existing: Omit<repo.MemoryRow, 'rank'>): Promise<void> {
  if (existing.pinned) throw hiveError(409, `"${existing.title}" is pinned (${existing.id}); remember with force to refine it.`);
  if (await repo.supersedesOthers(db, existing.id)) throw hiveError(409, `"${existing.title}" supersedes other memories (${existing.id}); remember with force to refine it.`);
}

/** Marks the memories `ids` as replaced by `by`; each must be a live memory the caller may write. */
async function supersede(db: Queryable, credential: HiveCredential, by: string, ids: string[] | undefined): Promise<void> {
  if (!ids?.length) return;
  const unique = [...new Set(ids)];
  if (unique.includes(by)) throw hiveError(409, 'A memory cannot supersede itself.');
  for (const id of unique) {
    const memory = await writable(db, credential, id);
    requireAuthority(credential, memory.kind);
  }
  await repo.markSuperseded(db, unique, by);
}

/** Guardrails and axioms are written (and refined, and forgotten) only by people holding that authority. */
function requireAuthority(credential: HiveCredential, kind: MemoryKind): void {
  if (kind === 'guardrail' && !credential.guardrailAuthority) throw hiveError(403, 'Writing a guardrail needs guardrail authority.');
  if (kind === 'axiom' && !credential.axiomAuthority) throw hiveError(403, 'Writing an axiom needs axiom authority.');
}

function authorship(credential: HiveCredential, source: string | undefined): repo.Authorship {
  return { personId: credential.personId, tokenId: credential.tokenId, source: source ?? null };
}
