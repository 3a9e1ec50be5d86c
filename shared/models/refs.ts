import { serviceError } from '../errors.js';
import { CATALOG, FIRST_PARTY_PROVIDER, catalogModel, type CatalogModel } from './catalog.js';
import { EMPTY_REQUEST_SHAPE, type RequestShape } from './dynamic-profiles.js';

/**
 * Typed model references (spec 1, "Model references" and "Region suffixes"). Parsing checks the
 * form; resolution always ends at one concrete catalog model, which is what is metered, cached
 * and capability-checked. Every refusal carries param `model`.
 */
export const REGIONS = ['eu', 'us', 'eu-cloud1', 'us-cloud1', 'eu-cloud2', 'us-cloud2'] as const;
export type Region = (typeof REGIONS)[number];
export const MATCH_FAMILIES = ['sonnet', 'opus', 'haiku'] as const;

export type ModelRef =
  | { kind: 'svc'; text: string; provider: string; model: string; region: Region | undefined }
  | { kind: 'match'; text: string; provider: string; family: string; constraint: { op: '>=' | '='; version: number } | undefined }
  | { kind: 'slot'; text: string; alias: string }
  | { kind: 'dyn'; text: string; profile: string };

/** The most entries a cascade may list. */
export const MAX_CASCADE = 8;

/** A slot alias or dynamic-profile name (also checked by migration 012). */
export const DEFINITION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const PROVIDER = /^[a-z0-9][a-z0-9-]{0,31}$/;
const MATCH_BODY = /^([a-z0-9-]+)\/([a-z]+)(?:(>=|=)(\d+(?:\.\d+)?))?$/;

const invalid = (message: string) => serviceError('invalid_model_ref', { param: 'model', message });

export function parseModelRef(text: string): ModelRef {
  const colon = text.indexOf(':');
  const prefix = colon > 0 ? text.slice(0, colon) : '';
  const body = colon > 0 ? text.slice(colon + 1) : '';
  switch (prefix) {
    case 'user':
      throw serviceError('byok_not_supported', { param: 'model' });
    case 'svc': {
      const at = body.lastIndexOf('@');
      const path = at >= 0 ? body.slice(0, at) : body;
      const suffix = at >= 0 ? body.slice(at + 1) : undefined;
      const slash = path.indexOf('/');
      const provider = path.slice(0, slash);
      const model = path.slice(slash + 1);
      if (slash <= 0 || !PROVIDER.test(provider) || model === '' || /\s/.test(model)) throw invalid(`"${text}" is not svc:<provider>/<model>.`);
      if (suffix !== undefined && !(REGIONS as readonly string[]).includes(suffix)) throw invalid(`Unknown region suffix "@${suffix}"; known: ${REGIONS.map((r) => `@${r}`).join(', ')}.`);
      return { kind: 'svc', text, provider, model, region: suffix as Region | undefined };
    }
    case 'match': {
      if (body.includes('@')) throw invalid('Only svc: references take a region suffix.');
      const parts = MATCH_BODY.exec(body);
      if (!parts) throw invalid(`"${text}" is not match:<provider>/<family>, optionally followed by >=<n> or =<n>.`);
      const [, provider, family, op, version] = parts;
      return { kind: 'match', text, provider: provider!, family: family!, constraint: op ? { op: op as '>=' | '=', version: Number(version) } : undefined };
    }
    case 'slot':
    case 'dyn': {
      if (body.includes('@')) throw invalid('Only svc: references take a region suffix.');
      if (!DEFINITION_NAME.test(body)) throw invalid(`"${text}" needs a name of letters, digits, _ . - (at most 64).`);
      return prefix === 'slot' ? { kind: 'slot', text, alias: body } : { kind: 'dyn', text, profile: body };
    }
    default:
      throw invalid(
        colon > 0 ? `Unknown reference prefix "${prefix}:".` : `"${text}" is a bare name; write svc:<provider>/<model>, match:<provider>/<family>, slot:<alias> or dyn:<profile>.`,
      );
  }
}

/** The request's `model`: one reference, or a non-empty array of them (a cost cascade, cheap first). */
export function parseModelField(value: unknown): { refs: ModelRef[]; cascade: boolean } {
  if (value === undefined || value === null || value === '') throw serviceError('missing_model', { param: 'model' });
  if (typeof value === 'string') return { refs: [parseModelRef(value)], cascade: false };
  if (!Array.isArray(value) || value.length === 0 || value.some((entry) => typeof entry !== 'string' || entry === '')) {
    throw invalid('model must be a reference string or a non-empty array of reference strings.');
  }
  if (value.length > MAX_CASCADE) throw invalid(`A cascade lists at most ${MAX_CASCADE} references.`);
  const refs = (value as string[]).map(parseModelRef);
  // A region-pinned reference serves one concrete model, so it never takes part in a cascade.
  if (refs.length > 1 && refs.some((ref) => ref.kind === 'svc' && ref.region !== undefined)) throw invalid('A region-pinned reference cannot be part of a cascade.');
  return { refs, cascade: refs.length > 1 };
}

export interface Resolution {
  model: CatalogModel;
  region: Region | undefined;
  /** The reference as written, before slots and profiles were followed. */
  requested: string;
  /** A pinned match: reference whose family has a newer model: that model's id (X-Svc-Model-Newer-Available). */
  newerAvailable?: string;
  /** dyn: references: the profile and why it chose this model (X-Svc-Dynamic-Profile / -Reason). */
  dynamic?: { profile: string; reason: string };
}

/** What resolution needs from the developer's own definitions (stored per developer). */
export interface ResolutionContext {
  /** The reference a slot alias points to, or undefined when the developer has no such slot. */
  slot(alias: string): Promise<string | undefined>;
  /** The reference a dynamic profile chooses for a request of this shape, with its reason; undefined if unknown. */
  dynamic(profile: string, request: RequestShape): Promise<{ ref: string; reason: string } | undefined>;
}

const MAX_ALIAS_DEPTH = 8;

/** `request` is the shape dyn: profiles choose by; without it a profile sees an empty request. */
export async function resolveModelRef(ref: ModelRef, context: ResolutionContext, request: RequestShape = EMPTY_REQUEST_SHAPE): Promise<Resolution> {
  return resolve(ref, context, ref.text, [], request);
}

async function resolve(ref: ModelRef, context: ResolutionContext, requested: string, seenSlots: string[], request: RequestShape): Promise<Resolution> {
  switch (ref.kind) {
    case 'svc':
      return { model: resolveSvc(ref), region: ref.region, requested };
    case 'match':
      return { ...resolveMatch(ref), region: undefined, requested };
    case 'slot': {
      if (seenSlots.includes(ref.alias) || seenSlots.length >= MAX_ALIAS_DEPTH) {
        throw serviceError('slot_cycle', { param: 'model', message: `Slot aliases form a cycle: ${[...seenSlots, ref.alias].map((alias) => `slot:${alias}`).join(' → ')}.` });
      }
      const target = await context.slot(ref.alias);
      if (target === undefined) throw serviceError('unknown_slot', { param: 'model', message: `No slot named "${ref.alias}".` });
      const next = parseModelRef(target);
      // A region belongs to an svc: reference written by the caller, never to one reached through a slot.
      if (next.kind === 'svc' && next.region) throw invalid(`slot:${ref.alias} points to a region-pinned reference, which a slot cannot carry.`);
      return resolve(next, context, requested, [...seenSlots, ref.alias], request);
    }
    case 'dyn': {
      const choice = await context.dynamic(ref.profile, request);
      if (!choice) throw serviceError('unknown_dynamic_profile', { param: 'model', message: `No dynamic profile named "${ref.profile}".` });
      const chosen = parseModelRef(choice.ref);
      if (chosen.kind === 'dyn') throw invalid('A dynamic profile must choose an svc:, match: or slot: reference.');
      if (chosen.kind === 'svc' && chosen.region) throw invalid(`dyn:${ref.profile} chose a region-pinned reference, which a profile cannot carry.`);
      const resolution = await resolve(chosen, context, requested, seenSlots, request);
      return { ...resolution, dynamic: { profile: ref.profile, reason: choice.reason } };
    }
  }
}

function resolveSvc(ref: Extract<ModelRef, { kind: 'svc' }>): CatalogModel {
  if (!CATALOG.some((model) => model.provider === ref.provider)) {
    throw serviceError('unsupported_provider', { param: 'model', message: `The gateway does not route to a provider called "${ref.provider}".` });
  }
  const model = catalogModel(`svc:${ref.provider}/${ref.model}`);
  if (!model) throw invalid(`svc:${ref.provider}/${ref.model} is not in the model catalog (GET /v1/models lists them).`);
  if (ref.region === 'eu' || ref.region === 'us') {
    if (ref.provider !== FIRST_PARTY_PROVIDER) throw serviceError('unsupported_provider', { param: 'model', message: `@${ref.region} applies to svc:${FIRST_PARTY_PROVIDER}/* models only.` });
  } else if (ref.region && !model.cloudIds) {
    throw serviceError('unsupported_provider', { param: 'model', message: `@${ref.region} needs a model with a cloud-native id (the opus, sonnet and haiku families).` });
  }
  return model;
}

function resolveMatch(ref: Extract<ModelRef, { kind: 'match' }>): { model: CatalogModel; newerAvailable?: string } {
  if (ref.provider !== FIRST_PARTY_PROVIDER) {
    throw serviceError('unsupported_provider', { param: 'model', message: `match: families are wired for ${FIRST_PARTY_PROVIDER} only.` });
  }
  if (!(MATCH_FAMILIES as readonly string[]).includes(ref.family)) throw invalid(`Unknown family "${ref.family}"; supported: ${MATCH_FAMILIES.join(', ')}.`);
  const family = CATALOG.filter((model) => model.provider === ref.provider && model.family === ref.family).sort((a, b) => a.version! - b.version!);
  const newest = family.at(-1)!;
  if (!ref.constraint) return { model: newest };
  const { op, version } = ref.constraint;
  if (op === '>=') {
    if (newest.version! < version) throw invalid(`No ${ref.family} model at version ${version} or newer.`);
    return { model: newest };
  }
  const pinned = family.find((model) => model.version === version);
  if (!pinned) throw invalid(`No ${ref.family} model at version ${version}; versions: ${family.map((model) => model.version).join(', ')}.`);
  return { model: pinned, ...(newest.version! > version && { newerAvailable: newest.id }) };
}
