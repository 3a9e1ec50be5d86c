import type { MeteredCall } from '../billing/metered-call.js';
import { withTransaction } from '../db/pool.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { brainKeys, brainOf } from './brains.js';
import { embed, embedTextOf, openEntry, SpaceSwapped } from './entries.js';
import { openJson, writeMemory, type HeldCandidate, type LearnServices } from './learning.js';
import * as learned from './learning-repository.js';
import { rankingOf } from './policy.js';
import * as repo from './repository.js';

/**
 * Review of what learning held back (spec 2): proposals wait for approve or reject; conflicts
 * (a turn contradicted a memory) wait to be resolved, by keeping the memory as it is or by
 * accepting the incoming statement as its next version.
 */
const PAGE = { defaultLimit: 100, maxLimit: 500 };

export async function listProposals(platform: LearnServices, developerId: string, brainId: string, query: { limit?: number; offset?: number }) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const { limit, offset } = pageOf(query);
  const rows = await learned.pendingProposals(platform.db, brain.id, limit, offset);
  return { object: 'list' as const, data: rows.slice(0, limit).map((row) => formatProposal(brain, row, openJson<HeldCandidate>(keys, brain.id, 'proposal', row.id, row.candidate))), has_more: rows.length > limit, limit, offset };
}

/** Approve writes the proposed memory (a refinement whose target is gone is added instead); reject only records the decision. */
export async function decideProposal(platform: LearnServices, developerId: string, call: MeteredCall, brainId: string, body: { proposal_id: string; action: 'approve' | 'reject' }) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const proposal = await learned.findProposal(platform.db, brain.id, body.proposal_id);
  if (!proposal) throw serviceError('not_found', { param: 'proposal_id', message: 'No such proposal in this brain.' });
  if (proposal.status !== 'pending') throw serviceError('proposal_decided', { param: 'proposal_id' });
  const held = openJson<HeldCandidate>(keys, brain.id, 'proposal', proposal.id, proposal.candidate);
  const vector = body.action === 'approve' ? (await embed(platform, call, brain, [embedTextOf(held.memory.title, held.memory.body)], `brain-proposal:${proposal.id}`))[0]! : null;

  const { decided, entryId } = await withTransaction(platform.db, async (client) => {
    const locked = await brainOf(client, developerId, brainId, 'update');
    if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
    const current = await learned.findProposal(client, brain.id, proposal.id, 'update');
    if (current?.status !== 'pending') throw serviceError('proposal_decided', { param: 'proposal_id' });
    let written: string | null = null;
    if (vector) {
      const target = proposal.target_entry_id ? await repo.currentEntry(client, brain.id, proposal.target_entry_id) : undefined;
      written = target ? target.entry_id : newId('ent_');
      // The reviewer's approval stands for the trust the input lacked.
      await writeMemory(client, locked, keys, { scope: proposal.scope, trust: 'high', source: held.source }, written, held.memory, held.type, vector, target?.trust ?? null);
      await repo.bumpWriteSeq(client, brain.id);
    }
    return { decided: await learned.decideProposal(client, proposal.id, vector ? 'approved' : 'rejected'), entryId: written };
  });
  return { ...formatProposal(brain, decided, held), ...(entryId && { entry_id: entryId }) };
}

export async function listConflicts(platform: LearnServices, developerId: string, brainId: string, query: { limit?: number; offset?: number }) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const { limit, offset } = pageOf(query);
  const rows = await learned.openConflicts(platform.db, brain.id, limit, offset);
  const data = await Promise.all(rows.slice(0, limit).map(async (row) => formatConflict(row, openJson<HeldCandidate>(keys, brain.id, 'conflict', row.id, row.candidate), await storedOf(platform, brain, keys, row.entry_id))));
  return { object: 'list' as const, data, has_more: rows.length > limit, limit, offset };
}

/** Marks a conflict resolved: keep_existing (default) leaves the memory; accept_incoming makes the incoming statement its next version. */
export async function resolveConflict(platform: LearnServices, developerId: string, call: MeteredCall, brainId: string, body: { conflict_id: string; resolution?: 'keep_existing' | 'accept_incoming' }) {
  const brain = await brainOf(platform.db, developerId, brainId);
  const keys = await brainKeys(platform, brain);
  const conflict = await learned.findConflict(platform.db, brain.id, body.conflict_id);
  if (!conflict) throw serviceError('not_found', { param: 'conflict_id', message: 'No such conflict in this brain.' });
  if (conflict.status !== 'open') throw serviceError('conflict_resolved', { param: 'conflict_id' });
  const resolution = body.resolution ?? 'keep_existing';
  const held = openJson<HeldCandidate>(keys, brain.id, 'conflict', conflict.id, conflict.candidate);
  const vector = resolution === 'accept_incoming' ? (await embed(platform, call, brain, [embedTextOf(held.memory.title, held.memory.body)], `brain-conflict:${conflict.id}`))[0]! : null;

  const resolved = await withTransaction(platform.db, async (client) => {
    const locked = await brainOf(client, developerId, brainId, 'update');
    if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
    const current = await learned.findConflict(client, brain.id, conflict.id, 'update');
    if (current?.status !== 'open') throw serviceError('conflict_resolved', { param: 'conflict_id' });
    if (vector) {
      const stored = await repo.currentEntry(client, brain.id, conflict.entry_id);
      await writeMemory(client, locked, keys, { scope: conflict.scope, trust: 'high', source: held.source }, conflict.entry_id, held.memory, held.type, vector, stored?.trust ?? null);
      await repo.bumpWriteSeq(client, brain.id);
    }
    return learned.resolveConflict(client, conflict.id, resolution);
  });
  return formatConflict(resolved, held, await storedOf(platform, brain, keys, conflict.entry_id));
}

function pageOf(query: { limit?: number; offset?: number }) {
  return { limit: Math.min(query.limit ?? PAGE.defaultLimit, PAGE.maxLimit), offset: query.offset ?? 0 };
}

async function storedOf(platform: LearnServices, brain: repo.BrainRow, keys: Awaited<ReturnType<typeof brainKeys>>, entryId: string) {
  const entry = await repo.currentEntry(platform.db, brain.id, entryId);
  if (!entry) return null;
  const opened = openEntry(keys, entry);
  return { entry_id: entry.entry_id, type: entry.type, title: opened.title, body: opened.body, trust: entry.trust };
}

const memoryOf = (held: HeldCandidate) => ({ type: held.type, title: held.memory.title, body: held.memory.body, entities: held.memory.entities.map((entity) => entity.name), trust: held.trust });

function formatProposal(brain: repo.BrainRow, row: learned.ProposalRow, held: HeldCandidate) {
  return {
    object: 'brain.proposal' as const,
    id: row.id,
    brain_id: row.brain_id,
    scope: row.scope,
    action: row.action,
    target_entry_id: row.target_entry_id,
    reason: row.reason,
    tier: rankingOf(brain.memory_policy, 'memory', held.type).tier,
    memory: memoryOf(held),
    status: row.status,
    created_at: row.created_at.toISOString(),
    decided_at: row.decided_at?.toISOString() ?? null,
  };
}

function formatConflict(row: learned.ConflictRow, held: HeldCandidate, stored: Awaited<ReturnType<typeof storedOf>>) {
  return {
    object: 'brain.conflict' as const,
    id: row.id,
    brain_id: row.brain_id,
    scope: row.scope,
    entry_id: row.entry_id,
    existing: stored,
    incoming: memoryOf(held),
    reason: row.reason,
    status: row.status,
    resolution: row.resolution,
    created_at: row.created_at.toISOString(),
    resolved_at: row.resolved_at?.toISOString() ?? null,
  };
}
