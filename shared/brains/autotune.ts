import { withTransaction, type Queryable } from '../db/pool.js';
import { recordEvent } from '../events/outbox.js';
import * as learned from './learning-repository.js';
import { TIERS, type Tier } from './policy.js';
import { brainOf, type BrainServices } from './brains.js';
import type * as repo from './repository.js';

/**
 * Autotune (spec 2, tuning auto): a multiplier per tier over the taxonomy's weights, learnt from
 * which recalled memories the answers used. A tier whose memories are used as often as the best
 * tier's keeps its full weight; one used less falls towards FLOOR. Multipliers never exceed 1, so
 * a composite never exceeds its cosine (recall's early stop depends on it).
 *
 * The regression guard replays the brain's own recent recalls: each recalled list re-ranked under
 * the new multipliers must place the memories that were used at least as high (mean reciprocal
 * rank of the first used memory) as the current ones do. If it would drop, the current
 * multipliers stay and tuning freezes (brain.autotune.frozen). Only native memories are recalled
 * into a learn pass's history, so mounted rows never drive it.
 */
export const AUTOTUNE = {
  /** Recent passes (with recalled memories) that tuning learns from. */
  window: 200,
  /** Passes needed before the first change. */
  minPasses: 10,
  /** Recalls of a tier needed before its use rate counts. */
  minRecalls: 5,
  floor: 0.7,
  /** A drop in replayed quality beyond this freezes tuning. */
  tolerance: 0.01,
} as const;

export type TierMultipliers = learned.TierMultipliers;
export type HistoryPass = Pick<learned.LearnPassRow, 'recalled' | 'recalled_tiers' | 'recalled_scores' | 'used'>;

/** The multipliers the history supports: each tier's use rate against the best tier's. */
export function learnedMultipliers(history: HistoryPass[]): TierMultipliers {
  const recalled = new Map<string, number>();
  const used = new Map<string, number>();
  for (const pass of history) {
    const usedIds = new Set(pass.used);
    pass.recalled.forEach((entryId, i) => {
      const tier = pass.recalled_tiers[i]!;
      recalled.set(tier, (recalled.get(tier) ?? 0) + 1);
      if (usedIds.has(entryId)) used.set(tier, (used.get(tier) ?? 0) + 1);
    });
  }
  const rates = new Map<Tier, number>();
  for (const tier of TIERS) {
    const count = recalled.get(tier) ?? 0;
    if (count >= AUTOTUNE.minRecalls) rates.set(tier, (used.get(tier) ?? 0) / count);
  }
  const best = Math.max(0, ...rates.values());
  if (best === 0) return {};
  return Object.fromEntries([...rates].map(([tier, rate]) => [tier, round(AUTOTUNE.floor + (1 - AUTOTUNE.floor) * (rate / best))]));
}

/**
 * Mean reciprocal rank of the first used memory over the passes that used one, each pass's
 * recalled list re-scored from `scoredUnder` (the multipliers its scores carry) to `candidate`.
 */
export function replayedQuality(history: HistoryPass[], candidate: TierMultipliers, scoredUnder: TierMultipliers): number {
  let total = 0;
  let passes = 0;
  for (const pass of history) {
    const usedIds = new Set(pass.used);
    if (usedIds.size === 0) continue;
    const ranked = pass.recalled
      .map((entryId, i) => {
        const tier = pass.recalled_tiers[i] as Tier;
        return { entryId, score: pass.recalled_scores[i]! * ((candidate[tier] ?? 1) / (scoredUnder[tier] ?? 1)) };
      })
      .sort((a, b) => b.score - a.score);
    const first = ranked.findIndex((item) => usedIds.has(item.entryId));
    total += first === -1 ? 0 : 1 / (first + 1);
    passes += 1;
  }
  return passes === 0 ? 0 : total / passes;
}

export type AutotuneStep = { action: 'keep' } | { action: 'tune'; next: TierMultipliers } | { action: 'freeze'; before: number; after: number };

/** What tuning does with this history, from the current multipliers. */
export function autotuneStep(history: HistoryPass[], current: TierMultipliers): AutotuneStep {
  if (history.length < AUTOTUNE.minPasses) return { action: 'keep' };
  const next = learnedMultipliers(history);
  if (sameMultipliers(next, current)) return { action: 'keep' };
  const before = replayedQuality(history, current, current);
  const after = replayedQuality(history, next, current);
  if (after < before - AUTOTUNE.tolerance) return { action: 'freeze', before, after };
  return { action: 'tune', next };
}

/** One tuning step after a learn pass, inside its transaction (the brain row is locked). */
export async function retune(client: Queryable, brain: repo.BrainRow): Promise<AutotuneStep> {
  const history = await learned.recentRecallHistory(client, brain.id, AUTOTUNE.window);
  const step = autotuneStep(history, brain.tier_multipliers);
  if (step.action === 'tune') await learned.setTierMultipliers(client, brain.id, step.next, brain.tier_multipliers);
  if (step.action === 'freeze') {
    await learned.setAutotuneFrozen(client, brain.id, true);
    await recordEvent(client, brain.developer_id, 'brain.autotune.frozen', { id: brain.id, reason: 'regression', quality_before: round(step.before), quality_after: round(step.after) });
  }
  return step;
}

const sameMultipliers = (a: TierMultipliers, b: TierMultipliers) => TIERS.every((tier) => (a[tier] ?? 1) === (b[tier] ?? 1));
const round = (value: number) => Math.round(value * 1e4) / 1e4;

/**
 * POST /v1/brains/{id}/autotune: freeze keeps the current multipliers and stops tuning
 * (brain.autotune.frozen); reset drops what tuning learnt and lets it start again.
 */
export async function controlAutotune(platform: Pick<BrainServices, 'db'>, developerId: string, brainId: string, action: 'freeze' | 'reset') {
  return withTransaction(platform.db, async (client) => {
    const brain = await brainOf(client, developerId, brainId, 'update');
    if (action === 'freeze') {
      await learned.setAutotuneFrozen(client, brain.id, true);
      if (!brain.autotune_frozen) await recordEvent(client, brain.developer_id, 'brain.autotune.frozen', { id: brain.id, reason: 'manual' });
    } else {
      await learned.setAutotuneFrozen(client, brain.id, false, {});
    }
    const after = (await brainOf(client, developerId, brainId))!;
    return { object: 'brain.autotune' as const, brain_id: brain.id, tuning: after.tuning, frozen: after.autotune_frozen, tier_multipliers: after.tier_multipliers };
  });
}
