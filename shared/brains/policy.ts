import { z } from 'zod';

/**
 * A brain's memory_policy (spec 2): the defaults, the partial policy a create or PATCH sends
 * merged over them, and what recall reads from it: each memory type's tier, weight and decay.
 *
 * Tiers: A and B are evergreen (they age only by supersession), C fades unless reused (spaced
 * repetition), D is short-lived status. `decay` is a half-life in days; an evergreen tier has none.
 */
export const TIERS = ['A', 'B', 'C', 'D'] as const;
export type Tier = (typeof TIERS)[number];
export const DECAY_ANCHORS = ['created', 'updated', 'last_used'] as const;
export type DecayAnchor = (typeof DECAY_ANCHORS)[number];

/** Half-life in days by tier; null is evergreen. */
export const TIER_HALF_LIFE_DAYS: Record<Tier, number | null> = { A: null, B: null, C: 30, D: 3 };

const typeLabel = z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'a lowercase label: letters, digits, _ and -, up to 64 characters');

export const taxonomyEntry = z.strictObject({
  type: typeLabel,
  tier: z.enum(TIERS),
  weight: z.number().min(0).max(1),
  decay: z.number().positive().max(36_500).optional().describe('Half-life in days, overriding the tier.'),
  anchor: z.enum(DECAY_ANCHORS).optional().describe("Overrides the brain's decay_anchor for this type."),
});
export type TaxonomyEntry = z.infer<typeof taxonomyEntry>;

export const memoryPolicyPatch = z.strictObject({
  extraction_rubric: z.string().max(10_000).optional(),
  type_taxonomy: z
    .array(taxonomyEntry)
    .min(1)
    .max(64)
    .refine((types) => new Set(types.map((entry) => entry.type)).size === types.length, 'each type once')
    .optional(),
  consolidate_at: z.number().int().min(2).max(1_000).optional(),
  prune_grace_days: z.number().int().min(1).max(3_650).optional(),
  learn_mode: z.enum(['autonomous', 'review']).optional(),
  per_tier_review: z.partialRecord(z.enum(TIERS), z.enum(['review', 'auto'])).optional(),
  tuning: z.enum(['auto', 'manual']).optional(),
  decay_anchor: z.enum(DECAY_ANCHORS).optional(),
  on_unfunded: z.enum(['fallback', 'recall_only', 'reject']).optional(),
  ignore: z
    .strictObject({
      rubric: z.string().max(10_000).optional(),
      patterns: z.array(z.string().min(1).max(512)).max(100).optional(),
      require_task_relevance: z.boolean().optional(),
    })
    .optional(),
  chunking: z.strictObject({ strategy: z.literal('paragraph'), max_chars: z.number().int().min(200).max(100_000) }).optional(),
});
export type MemoryPolicyPatch = z.infer<typeof memoryPolicyPatch>;

export interface MemoryPolicy {
  extraction_rubric: string;
  type_taxonomy: TaxonomyEntry[];
  consolidate_at: number;
  prune_grace_days: number;
  learn_mode: 'autonomous' | 'review';
  per_tier_review: Partial<Record<Tier, 'review' | 'auto'>>;
  tuning: 'auto' | 'manual';
  decay_anchor: DecayAnchor;
  on_unfunded: 'fallback' | 'recall_only' | 'reject';
  ignore: { rubric?: string; patterns?: string[]; require_task_relevance?: boolean };
  chunking: { strategy: 'paragraph'; max_chars: number };
}

/** The default preset of memory types. */
export const DEFAULT_TAXONOMY: TaxonomyEntry[] = [
  { type: 'decision', tier: 'A', weight: 1 },
  { type: 'constraint', tier: 'A', weight: 1 },
  { type: 'fact', tier: 'B', weight: 0.9 },
  { type: 'preference', tier: 'B', weight: 0.9 },
  { type: 'procedure', tier: 'B', weight: 0.85 },
  { type: 'observation', tier: 'C', weight: 0.75 },
  { type: 'status', tier: 'D', weight: 0.6 },
];

export const DEFAULT_POLICY: MemoryPolicy = {
  extraction_rubric: 'Remember durable facts, decisions, constraints and preferences that will matter in later turns; skip small talk and one-off details.',
  type_taxonomy: DEFAULT_TAXONOMY,
  consolidate_at: 12,
  prune_grace_days: 45,
  learn_mode: 'autonomous',
  per_tier_review: {},
  tuning: 'auto',
  decay_anchor: 'last_used',
  on_unfunded: 'fallback',
  ignore: {},
  chunking: { strategy: 'paragraph', max_chars: 2_000 },
};

/** A partial policy over a whole one: objects merge a level deep, arrays (the taxonomy) replace. */
export function mergePolicy(base: MemoryPolicy, patch: MemoryPolicyPatch | undefined): MemoryPolicy {
  if (!patch) return base;
  const merged = { ...base } as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    const current = merged[key];
    merged[key] = isPlainObject(value) && isPlainObject(current) ? { ...current, ...value } : value;
  }
  return merged as unknown as MemoryPolicy;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** What recall needs of an entry's type under a policy: its tier weight, half-life and decay anchor. */
export interface TypeRanking {
  tier: Tier;
  weight: number;
  halfLifeDays: number | null;
  anchor: DecayAnchor;
}

/**
 * Reference and policy entries rank as evergreen tier A at full weight: they are documents and
 * rules, not remembered observations. A memory's type ranks by the taxonomy; a type the taxonomy
 * no longer lists ranks as tier C at weight 0.5 until it is reclassified.
 */
export function rankingOf(policy: MemoryPolicy, entryClass: string, type: string | null): TypeRanking {
  if (entryClass !== 'memory') return { tier: 'A', weight: 1, halfLifeDays: null, anchor: policy.decay_anchor };
  const entry = policy.type_taxonomy.find((candidate) => candidate.type === type);
  if (!entry) return { tier: 'C', weight: 0.5, halfLifeDays: TIER_HALF_LIFE_DAYS.C, anchor: policy.decay_anchor };
  return { tier: entry.tier, weight: entry.weight, halfLifeDays: entry.decay ?? TIER_HALF_LIFE_DAYS[entry.tier], anchor: entry.anchor ?? policy.decay_anchor };
}

/**
 * The highest tier weight any row ranked under this policy can have: reference and policy
 * entries, each listed type, and a type the taxonomy no longer lists, each as tuned. Recency,
 * usage and graph never exceed 1, so no row scores above its cosine times this: the bound
 * recall's early stop draws against. Autotune lowering the weights of the tiers that are not used
 * lowers it, and with it how deep recall must draw to be sure of its places.
 */
export function weightCeiling(policy: MemoryPolicy, tuning: Parameters<typeof tunedWeight>[0]): number {
  const rankings = [rankingOf(policy, 'reference', null), rankingOf(policy, 'memory', null), ...policy.type_taxonomy.map((entry) => rankingOf(policy, 'memory', entry.type))];
  return Math.max(...rankings.map((ranking) => tunedWeight(tuning, ranking.tier, ranking.weight)));
}

/** The types whose ranking differs between two policies (brain.policy.changed's changed_types). */
export function changedTypes(before: MemoryPolicy, after: MemoryPolicy): string[] {
  const types = new Set([...before.type_taxonomy, ...after.type_taxonomy].map((entry) => entry.type));
  return [...types].filter((type) => JSON.stringify(rankingOf(before, 'memory', type)) !== JSON.stringify(rankingOf(after, 'memory', type))).sort();
}

/**
 * A pack row's tier weight (spec 2, recall with mounts): from its version's frozen policy and the
 * tier multipliers snapshotted with it, whatever the consumer brain's policy says.
 */
export function frozenTierWeight(version: FrozenVersion, entryClass: string, type: string | null): number {
  const ranking = rankingOf(version.memory_policy, entryClass, type);
  return tunedWeight(frozenTuning(version), ranking.tier, ranking.weight);
}

type FrozenVersion = { memory_policy: MemoryPolicy; tier_multipliers: Partial<Record<Tier, number>> };
/** A pack version's tuning as frozen at publish: its policy's mode with the multipliers snapshotted beside it. */
const frozenTuning = (version: FrozenVersion) => ({ tuning: version.memory_policy.tuning, tier_multipliers: version.tier_multipliers });

/**
 * A tier's effective weight: the taxonomy's, times autotune's learnt multiplier for the tier
 * while tuning is auto (capped at 1, so a composite never exceeds its cosine).
 */
export function tunedWeight(brain: { tuning: 'auto' | 'manual'; tier_multipliers: Partial<Record<Tier, number>> }, tier: Tier, weight: number): number {
  if (brain.tuning !== 'auto') return weight;
  return Math.min(1, weight * (brain.tier_multipliers[tier] ?? 1));
}

/** weightCeiling of a pack version's rows, by its frozen policy and tier multipliers. */
export function frozenWeightCeiling(version: FrozenVersion): number {
  return weightCeiling(version.memory_policy, frozenTuning(version));
}
