import { backgroundCall } from '../billing/background-call.js';
import { withTransaction } from '../db/pool.js';
import { newId } from '../ids.js';
import { recency } from '../scoring/composite.js';
import { brainKeys } from './brains.js';
import { embed, embedTextOf, openEntry, SpaceSwapped } from './entries.js';
import { learningChat, writeMemory, type LearnServices } from './learning.js';
import { consolidationAnswer, consolidationRequest, parseAnswer } from './learning-prompts.js';
import * as learned from './learning-repository.js';
import { TIER_HALF_LIFE_DAYS, type Tier } from './policy.js';
import * as repo from './repository.js';

/**
 * The upkeep of learnt memory (spec 2): consolidation merges related memories of a crowded scope
 * into fewer, and pruning retires cold soft memories. Both supersede rather than erase: the old
 * versions close, so recall as_of an earlier instant still sees them.
 */

/** Memories of one group go to the model together; bigger groups are split. */
const MAX_GROUP = 24;

/**
 * While the scope holds more than consolidate_at memories: group related ones (sharing an entity;
 * else of the same type), ask the model to merge each group, and write each merged memory in place
 * of those it replaces, in one transaction per group that first checks they are all still current.
 */
export async function consolidateScope(platform: LearnServices, brainId: string, scope: string): Promise<{ merged: number; replaced: number }> {
  const brain = await repo.activeBrainById(platform.db, brainId);
  if (!brain) return { merged: 0, replaced: 0 };
  const keys = await brainKeys(platform, brain);
  const call = await backgroundCall(platform.db, { developerId: brain.developer_id, payerAccountId: brain.developer_id, customerId: null, requestId: `consolidate_${newId('', 16)}` });
  const stored = await learned.memoriesOfScope(platform.db, brain.id, scope);
  let count = stored.length;
  if (count <= brain.memory_policy.consolidate_at) return { merged: 0, replaced: 0 };
  const names = await learned.entityNamesOfEntries(platform.db, brain.id, stored.map((entry) => entry.entry_id));
  const opened = new Map(stored.map((entry) => [entry.entry_id, { entry, ...openEntry(keys, entry) }]));
  let merged = 0;
  let replaced = 0;
  for (const group of relatedGroups(stored, names)) {
    if (count <= brain.memory_policy.consolidate_at) break;
    const members = group.map((entryId) => opened.get(entryId)!);
    const spent = { micros: 0 };
    const content = await learningChat(platform, call, consolidationRequest(platform.config.BRAIN_LEARN_MODEL, members.map((member) => ({ entryId: member.entry.entry_id, type: member.entry.type, title: member.title, body: member.body }))), `consolidate:${brain.id}:${group[0]}`, spent);
    const answer = parseAnswer(consolidationAnswer, content);
    if (!answer) continue;
    for (const memory of answer.memories) {
      const replaces = [...new Set(memory.replaces)].filter((entryId) => group.includes(entryId));
      if (replaces.length < 2) continue;
      const type = brain.memory_policy.type_taxonomy.some((entry) => entry.type === memory.type) ? memory.type : (opened.get(replaces[0]!)!.entry.type ?? memory.type);
      const [vector] = await embed(platform, call, brain, [embedTextOf(memory.title, memory.body)], `consolidate:${brain.id}:${replaces[0]}`);
      const done = await withTransaction(platform.db, async (client) => {
        const locked = await repo.activeBrainById(client, brain.id, 'update');
        if (!locked) return false;
        if (locked.active_space !== brain.active_space) throw new SpaceSwapped();
        // One statement at a time: a transaction's connection runs one query at a time anyway (node-postgres
        // only queued these, and warns that it will stop doing so).
        const current: (repo.EntryRow | undefined)[] = [];
        for (const entryId of replaces) current.push(await repo.currentEntry(client, brain.id, entryId, 'update'));
        if (current.some((entry) => !entry || entry.scope !== scope)) return false;
        const entryId = newId('ent_');
        // The merged memory is as trusted as the least trusted memory it replaces, and came from consolidation.
        const trust = current.every((entry) => entry!.trust === 'high') ? 'high' : 'low';
        for (const entry of current) await repo.closeVersion(client, brain.id, entry!.version_id);
        await learned.moveEntityLinks(client, brain.id, replaces, entryId);
        await writeMemory(client, locked, keys, { scope, trust, source: 'consolidation' }, entryId, memory, type, vector!, null);
        await repo.bumpWriteSeq(client, brain.id);
        return true;
      });
      if (!done) continue;
      merged += 1;
      replaced += replaces.length;
      count -= replaces.length - 1;
    }
  }
  return { merged, replaced };
}

/**
 * Related memories, biggest group first: connected by a shared entity; memories with no entity
 * in common with any other are grouped by type. Groups of one are left alone.
 */
export function relatedGroups(memories: Pick<repo.EntryRow, 'entry_id' | 'type'>[], entityNames: Map<string, string[]>): string[][] {
  const parent = new Map(memories.map((memory) => [memory.entry_id, memory.entry_id]));
  const root = (id: string): string => {
    let at = id;
    while (parent.get(at) !== at) at = parent.get(at)!;
    return at;
  };
  const byName = new Map<string, string>();
  for (const memory of memories) {
    for (const name of entityNames.get(memory.entry_id) ?? []) {
      const other = byName.get(name);
      if (other) parent.set(root(memory.entry_id), root(other));
      else byName.set(name, memory.entry_id);
    }
  }
  const groups = new Map<string, string[]>();
  for (const memory of memories) {
    const linked = (entityNames.get(memory.entry_id) ?? []).length > 0;
    const key = linked ? `entity:${root(memory.entry_id)}` : `type:${memory.type ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), memory.entry_id]);
  }
  const split = [...groups.values()].flatMap((group) => Array.from({ length: Math.ceil(group.length / MAX_GROUP) }, (_, i) => group.slice(i * MAX_GROUP, (i + 1) * MAX_GROUP)));
  return split.filter((group) => group.length >= 2).sort((a, b) => b.length - a.length);
}

/** A soft memory has faded once its recency falls below this (a half-life past its anchor or more). */
export const FADED_BELOW = 0.5;
const DAY_MS = 86_400_000;

/**
 * Prunes cold soft memories of every brain, as of `at`: tier C and D memories unused (and not
 * updated) for prune_grace_days whose recency has faded. Tiers A and B never age out this way;
 * they change only when superseded. Each brain's prune is one transaction under its lock.
 */
export async function pruneColdMemories(platform: Pick<LearnServices, 'db'>, at: Date): Promise<{ brains: number; pruned: number }> {
  let pruned = 0;
  let brains = 0;
  for (const brainId of await learned.brainsWithMemories(platform.db)) {
    const count = await withTransaction(platform.db, async (client) => {
      const brain = await repo.activeBrainById(client, brainId, 'update');
      if (!brain) return 0;
      const soft = new Map(brain.memory_policy.type_taxonomy.filter((entry) => entry.tier === 'C' || entry.tier === 'D').map((entry) => [entry.type, entry]));
      if (soft.size === 0) return 0;
      const cold = await learned.coldMemories(client, brain.id, [...soft.keys()], new Date(at.getTime() - brain.memory_policy.prune_grace_days * DAY_MS));
      const faded = cold.filter((memory) => {
        const type = soft.get(memory.type!)!;
        const halfLife = type.decay ?? TIER_HALF_LIFE_DAYS[type.tier as Tier]!;
        return recency(halfLife, (memory.last_used ?? memory.updated_at).getTime(), at.getTime()) < FADED_BELOW;
      });
      for (const memory of faded) await repo.closeVersion(client, brain.id, memory.version_id);
      if (faded.length > 0) await repo.bumpWriteSeq(client, brain.id);
      return faded.length;
    });
    pruned += count;
    if (count > 0) brains += 1;
  }
  return { brains, pruned };
}

/** The platform's prune schedule (a Temporal schedule, daily), made once; a worker that finds it already there leaves it. */
export async function ensurePruneSchedule(platform: Pick<LearnServices, 'temporal' | 'config' | 'logger'>): Promise<void> {
  try {
    await platform.temporal.client.schedule.create({
      scheduleId: 'brain-prune',
      spec: { intervals: [{ every: '1 day' }] },
      action: { type: 'startWorkflow', workflowType: 'brainPruneWorkflow', taskQueue: platform.config.TEMPORAL_TASK_QUEUE, args: [{}] },
      policies: { overlap: 'SKIP' },
    });
  } catch (error) {
    if ((error as Error).name !== 'ScheduleAlreadyRunning') throw error;
  }
}
