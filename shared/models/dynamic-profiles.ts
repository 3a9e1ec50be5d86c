import { z } from 'zod';

/**
 * Dynamic profiles (`dyn:<name>`): a developer's ordered rules over the shape of one request,
 * each naming the model reference to use; the first rule whose every condition holds wins, else
 * the profile's default_model. The reason (X-Svc-Dynamic-Reason) says which rule and why, in
 * plain ASCII so it travels in a header.
 */

/** What a profile can look at: the request's shape, never its words beyond the difficulty estimate. */
export interface RequestShape {
  /** The gateway's estimate of the prompt's tokens (before the provider counts them). */
  promptTokens: number;
  /** The request declares tools. */
  tools: boolean;
  /** A message carries an image part. */
  vision: boolean;
  /** response_format is json_schema. */
  jsonSchema: boolean;
  /** 0 (trivial) to 1 (hard): see estimateDifficulty. */
  difficulty: number;
}

/** The shape used when a reference is resolved without a request (e.g. checking a definition). */
export const EMPTY_REQUEST_SHAPE: RequestShape = { promptTokens: 0, tools: false, vision: false, jsonSchema: false, difficulty: 0 };

const tokens = z.number().int().min(0).max(10_000_000);
const difficulty = z.number().min(0).max(1);

export const ruleConditions = z.strictObject({
  min_prompt_tokens: tokens.optional(),
  max_prompt_tokens: tokens.optional(),
  tools: z.boolean().optional(),
  vision: z.boolean().optional(),
  json_schema: z.boolean().optional(),
  min_difficulty: difficulty.optional(),
  max_difficulty: difficulty.optional(),
});

export type RuleConditions = z.infer<typeof ruleConditions>;

export interface ProfileRule {
  when: RuleConditions;
  model: string;
}

export interface DynamicProfile {
  rules: ProfileRule[];
  default_model: string;
}

/** The most rules one profile may hold. */
export const MAX_PROFILE_RULES = 32;

/** The first matching rule's model, or the default, with the reason in words. */
export function chooseFromProfile(profile: DynamicProfile, shape: RequestShape): { ref: string; reason: string } {
  for (const [index, rule] of profile.rules.entries()) {
    const reasons = matches(rule.when, shape);
    if (reasons) return { ref: rule.model, reason: `rule ${index + 1}${reasons.length ? ` (${reasons.join('; ')})` : ' (no conditions)'}` };
  }
  return { ref: profile.default_model, reason: `default_model (no rule matched: ${describe(shape)})` };
}

/** The conditions that held, in words, or undefined when one of them did not. */
function matches(when: RuleConditions, shape: RequestShape): string[] | undefined {
  const held: string[] = [];
  if (when.min_prompt_tokens !== undefined) {
    if (shape.promptTokens < when.min_prompt_tokens) return undefined;
    held.push(`prompt_tokens ${shape.promptTokens} >= ${when.min_prompt_tokens}`);
  }
  if (when.max_prompt_tokens !== undefined) {
    if (shape.promptTokens > when.max_prompt_tokens) return undefined;
    held.push(`prompt_tokens ${shape.promptTokens} <= ${when.max_prompt_tokens}`);
  }
  for (const [field, actual] of [['tools', shape.tools], ['vision', shape.vision], ['json_schema', shape.jsonSchema]] as const) {
    const wanted = when[field];
    if (wanted === undefined) continue;
    if (wanted !== actual) return undefined;
    held.push(actual ? field : `no ${field}`);
  }
  if (when.min_difficulty !== undefined) {
    if (shape.difficulty < when.min_difficulty) return undefined;
    held.push(`difficulty ${shape.difficulty.toFixed(2)} >= ${when.min_difficulty}`);
  }
  if (when.max_difficulty !== undefined) {
    if (shape.difficulty > when.max_difficulty) return undefined;
    held.push(`difficulty ${shape.difficulty.toFixed(2)} <= ${when.max_difficulty}`);
  }
  return held;
}

function describe(shape: RequestShape): string {
  return [
    `prompt_tokens ${shape.promptTokens}`,
    shape.tools ? 'tools' : 'no tools',
    shape.vision ? 'vision' : 'no vision',
    shape.jsonSchema ? 'json_schema' : 'no json_schema',
    `difficulty ${shape.difficulty.toFixed(2)}`,
  ].join(', ');
}

const HARD_WORDS = /\b(prove|proof|derive|theorem|analy[sz]e|analysis|step[- ]by[- ]step|reason(?:ing)?|optimi[sz]e|debug|refactor|architecture|algorithm|complexity|trade-?offs?|compare|evaluate|design)\b/gi;

/**
 * A cheap, deterministic difficulty estimate in [0, 1] from the text of the last user turn and the
 * conversation: length (up to 0.4), words that ask for reasoning (up to 0.4), code or math
 * (0.1) and a long conversation (0.1). It is a routing hint, not a judgement of the content.
 */
export function estimateDifficulty(texts: { last: string; all: string; turns: number; promptTokens: number }): number {
  const length = Math.min(1, texts.promptTokens / 4000) * 0.4;
  const hardWords = new Set((texts.last.match(HARD_WORDS) ?? []).map((word) => word.toLowerCase())).size;
  const reasoning = (Math.min(hardWords, 3) / 3) * 0.4;
  const technical = /```|\$\$|\\\(|\b(?:function|class|def|SELECT)\b/.test(texts.all) ? 0.1 : 0;
  const conversation = texts.turns > 6 ? 0.1 : 0;
  return Math.round((length + reasoning + technical + conversation) * 100) / 100;
}
