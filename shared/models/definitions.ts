import { z } from 'zod';
import type { Db } from '../db/pool.js';
import { ServiceError, serviceError } from '../errors.js';
import { pageRequest, toPage, type Page } from '../pagination.js';
import type { GatewayServices } from '../composition/gateway.js';
import { chooseFromProfile, MAX_PROFILE_RULES, ruleConditions } from './dynamic-profiles.js';
import { DEFINITION_NAME, parseModelRef, resolveModelRef, type ResolutionContext } from './refs.js';
import * as repo from './repository.js';

/**
 * A developer's own model definitions: slot aliases (`slot:<name>` → a model reference) and
 * dynamic profiles (`dyn:<name>` → rules over the request's shape). Both are managed with
 * PUT (create or replace), GET, DELETE on /v1/model_slots/{name} and /v1/dynamic_profiles/{name},
 * and listed in name order with the cursor envelope. Targets are checked when written (a reference
 * that parses, with a known model when it names one); what they point to is followed on every
 * call, so slots may be written in any order and a cycle is refused by the call that meets it.
 */

/** Resolves slot: and dyn: references against the developer's stored definitions. */
export function resolutionContextFor(platform: Pick<GatewayServices, 'db'>, developerId: string): ResolutionContext {
  return {
    async slot(alias) {
      return (await repo.findSlot(platform.db, developerId, alias))?.target;
    },
    async dynamic(profile, request) {
      const row = await repo.findProfile(platform.db, developerId, profile);
      return row ? chooseFromProfile(row, request) : undefined;
    },
  };
}

const description = z.string().max(512).nullable().optional();
export const slotBody = z.strictObject({ target: z.string().min(1).max(512), description });
export const profileBody = z.strictObject({
  description,
  rules: z.array(z.strictObject({ when: ruleConditions, model: z.string().min(1).max(512) })).max(MAX_PROFILE_RULES).optional(),
  default_model: z.string().min(1).max(512),
});


function checkName(name: string): string {
  if (!DEFINITION_NAME.test(name)) throw serviceError('invalid_request', { param: 'name', message: 'A name is 1-64 letters, digits, _ . - and starts with a letter or digit.' });
  return name;
}

/**
 * A target written into a definition: it must parse, carry no region (a region belongs to the
 * caller's own svc: reference), and a reference that names a model must name one the catalog has.
 * References to other slots and profiles are followed at call time only.
 */
async function checkTarget(text: string, param: string, options: { allowDynamic: boolean }): Promise<string> {
  try {
    const ref = parseModelRef(text);
    if (ref.kind === 'svc' && ref.region) throw serviceError('invalid_model_ref', { message: `${text}: a slot or profile cannot carry a region suffix; send the region-pinned svc: reference itself.` });
    if (ref.kind === 'dyn' && !options.allowDynamic) throw serviceError('invalid_model_ref', { message: 'A dynamic profile chooses svc:, match: or slot: references, not another profile.' });
    if (ref.kind === 'svc' || ref.kind === 'match') await resolveModelRef(ref, { slot: async () => undefined, dynamic: async () => undefined });
    return text;
  } catch (error) {
    if (error instanceof ServiceError) throw serviceError(error.code, { param, message: error.message });
    throw error;
  }
}

export function formatSlot(row: repo.SlotRow) {
  return {
    object: 'model_slot' as const,
    name: row.name,
    ref: `slot:${row.name}`,
    target: row.target,
    description: row.description,
    created_at: Math.floor(row.created_at.getTime() / 1000),
    updated_at: Math.floor(row.updated_at.getTime() / 1000),
  };
}

export function formatProfile(row: repo.ProfileRow) {
  return {
    object: 'dynamic_profile' as const,
    name: row.name,
    ref: `dyn:${row.name}`,
    description: row.description,
    rules: row.rules,
    default_model: row.default_model,
    created_at: Math.floor(row.created_at.getTime() / 1000),
    updated_at: Math.floor(row.updated_at.getTime() / 1000),
  };
}

export async function putSlot(db: Db, developerId: string, name: string, input: z.output<typeof slotBody>) {
  checkName(name);
  const target = await checkTarget(input.target, 'target', { allowDynamic: true });
  if (target === `slot:${name}`) throw serviceError('slot_cycle', { param: 'target', message: `slot:${name} cannot point to itself.` });
  return repo.upsertSlot(db, developerId, name, { target, description: input.description ?? null });
}

export async function getSlot(db: Db, developerId: string, name: string): Promise<repo.SlotRow> {
  const row = await repo.findSlot(db, developerId, name);
  if (!row) throw serviceError('not_found', { message: `No slot named "${name}".` });
  return row;
}

export async function removeSlot(db: Db, developerId: string, name: string) {
  if (!(await repo.deleteSlot(db, developerId, name))) throw serviceError('not_found', { message: `No slot named "${name}".` });
  return { object: 'model_slot' as const, name, deleted: true };
}

export async function listSlots(db: Db, developerId: string, query: { limit?: unknown; after?: unknown }): Promise<Page<ReturnType<typeof formatSlot>>> {
  const page = pageRequest(query);
  const rows = await repo.listSlots(db, developerId, page.after?.id, page.limit + 1);
  return toPage(rows.map((row) => ({ ...row, id: row.name })), page, formatSlot);
}

export async function putProfile(db: Db, developerId: string, name: string, input: z.output<typeof profileBody>) {
  checkName(name);
  const rules = input.rules ?? [];
  for (const [i, rule] of rules.entries()) {
    await checkTarget(rule.model, `rules.${i}.model`, { allowDynamic: false });
    const { min_prompt_tokens: minTokens, max_prompt_tokens: maxTokens, min_difficulty: minDifficulty, max_difficulty: maxDifficulty } = rule.when;
    if ((minTokens !== undefined && maxTokens !== undefined && minTokens > maxTokens) || (minDifficulty !== undefined && maxDifficulty !== undefined && minDifficulty > maxDifficulty)) {
      throw serviceError('invalid_request', { param: `rules.${i}.when`, message: 'A minimum is above its maximum: the rule could never match.' });
    }
  }
  await checkTarget(input.default_model, 'default_model', { allowDynamic: false });
  return repo.upsertProfile(db, developerId, name, { description: input.description ?? null, rules, default_model: input.default_model });
}

export async function getProfile(db: Db, developerId: string, name: string): Promise<repo.ProfileRow> {
  const row = await repo.findProfile(db, developerId, name);
  if (!row) throw serviceError('not_found', { message: `No dynamic profile named "${name}".` });
  return row;
}

export async function removeProfile(db: Db, developerId: string, name: string) {
  if (!(await repo.deleteProfile(db, developerId, name))) throw serviceError('not_found', { message: `No dynamic profile named "${name}".` });
  return { object: 'dynamic_profile' as const, name, deleted: true };
}

export async function listProfiles(db: Db, developerId: string, query: { limit?: unknown; after?: unknown }): Promise<Page<ReturnType<typeof formatProfile>>> {
  const page = pageRequest(query);
  const rows = await repo.listProfiles(db, developerId, page.after?.id, page.limit + 1);
  return toPage(rows.map((row) => ({ ...row, id: row.name })), page, formatProfile);
}
