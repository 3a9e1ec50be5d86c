import { describe, expect, it } from 'vitest';
import { autotuneStep, learnedMultipliers, replayedQuality, type HistoryPass } from '../shared/brains/autotune.js';
import { DEFAULT_POLICY, frozenWeightCeiling, mergePolicy, tunedWeight, weightCeiling } from '../shared/brains/policy.js';

/** Autotune's arithmetic: multipliers learnt from use, the replayed quality, and the regression guard. */
const pass = (recalled: [string, string, number][], used: string[]): HistoryPass => ({
  recalled: recalled.map(([id]) => id),
  recalled_tiers: recalled.map(([, tier]) => tier),
  recalled_scores: recalled.map(([, , score]) => score),
  used,
});
const times = (count: number, make: () => HistoryPass) => Array.from({ length: count }, make);

describe('autotune', () => {
  it('learns each tier at its use rate against the best tier, within [0.7, 1]', () => {
    const history = [...times(6, () => pass([['b', 'B', 0.5], ['c', 'C', 0.49]], ['b', 'c'])), ...times(4, () => pass([['b', 'B', 0.5], ['c', 'C', 0.49]], ['c']))];
    expect(learnedMultipliers(history)).toEqual({ B: 0.88, C: 1 });
    // Too few recalls of a tier: it keeps its weight.
    expect(learnedMultipliers(times(4, () => pass([['b', 'B', 0.5]], ['b'])))).toEqual({});
  });

  it('tunes when the replayed ranking holds or improves', () => {
    const history = [...times(6, () => pass([['b', 'B', 0.5], ['c', 'C', 0.49]], ['b', 'c'])), ...times(4, () => pass([['b', 'B', 0.5], ['c', 'C', 0.49]], ['c']))];
    expect(replayedQuality(history, {}, {})).toBeCloseTo(0.8);
    expect(replayedQuality(history, { B: 0.88, C: 1 }, {})).toBeCloseTo(1);
    expect(autotuneStep(history, {})).toEqual({ action: 'tune', next: { B: 0.88, C: 1 } });
    expect(autotuneStep(history, { B: 0.88, C: 1 })).toEqual({ action: 'keep' });
    expect(autotuneStep(history.slice(0, 9), {})).toEqual({ action: 'keep' });
  });

  it('freezes instead when the learnt weights would rank the used memories lower', () => {
    // B is used where it barely leads; C's uses sit far down. Aggregate rates favour C, which would cost B its lead.
    const history = [
      ...times(5, () => pass([['b1', 'B', 0.52], ['c1', 'C', 0.5]], ['b1'])),
      ...times(5, () => pass([['b2', 'B', 0.6], ['b3', 'B', 0.55], ['c2', 'C', 0.3]], ['c2'])),
    ];
    const step = autotuneStep(history, {});
    expect(step.action).toBe('freeze');
    if (step.action === 'freeze') expect(step.after).toBeLessThan(step.before);
  });

  it('applies multipliers only while tuning is auto, never above 1', () => {
    expect(tunedWeight({ tuning: 'auto', tier_multipliers: { C: 0.7 } }, 'C', 0.75)).toBeCloseTo(0.525);
    expect(tunedWeight({ tuning: 'manual', tier_multipliers: { C: 0.7 } }, 'C', 0.75)).toBe(0.75);
    expect(tunedWeight({ tuning: 'auto', tier_multipliers: { A: 1.5 } }, 'A', 1)).toBe(1);
  });

  it("bounds a row's weight by the highest tuned weight of references, listed types and unlisted ones", () => {
    const auto = (tier_multipliers: Record<string, number>) => ({ tuning: 'auto' as const, tier_multipliers });
    expect(weightCeiling(DEFAULT_POLICY, auto({}))).toBe(1);
    // References and decisions (tier A) tuned down: facts (tier B, 0.9) are the best a row can do.
    expect(weightCeiling(DEFAULT_POLICY, auto({ A: 0.7 }))).toBeCloseTo(0.9);
    expect(weightCeiling(DEFAULT_POLICY, { tuning: 'manual', tier_multipliers: { A: 0.7, B: 0.7 } })).toBe(1);
    // A taxonomy of low weights: references (tier A) and unlisted types (tier C at 0.5) still bound it.
    const low = mergePolicy(DEFAULT_POLICY, { type_taxonomy: [{ type: 'echo', tier: 'D', weight: 0.1 }] });
    expect(weightCeiling(low, auto({ A: 0.4 }))).toBe(0.5);
    expect(weightCeiling(low, auto({ A: 0.4, C: 0.5 }))).toBe(0.4);
    expect(frozenWeightCeiling({ memory_policy: { ...low, tuning: 'auto' }, tier_multipliers: { A: 0.4, C: 0.5 } })).toBe(0.4);
  });
});
