import { z } from 'zod';
import { serviceError } from '../errors.js';
import { CATALOG, type CatalogModel } from '../models/catalog.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ProviderAdapter } from '../providers/types.js';

/** POST /v1/moderations, up to the provider call: metered at zero, so it is free but still recorded. */
export const DEFAULT_MODERATION_MODEL = 'omni-moderation-latest';

const body = z.object({ input: z.unknown().optional(), model: z.string().optional() });

export interface ModerationPlan {
  model: CatalogModel;
  adapter: ProviderAdapter;
  input: string[];
}

export function planModeration(raw: unknown, providers: ProviderRegistry): ModerationPlan {
  const parsed = body.safeParse(raw ?? {});
  if (!parsed.success) throw serviceError('invalid_request', { param: String(parsed.error.issues[0]!.path[0] ?? ''), message: parsed.error.issues[0]!.message });
  const { input, model: requested } = parsed.data;
  if (input === undefined || input === '' || (Array.isArray(input) && input.length === 0)) throw serviceError('missing_input', { param: 'input' });
  const inputs = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(inputs) || inputs.some((entry) => typeof entry !== 'string')) throw serviceError('invalid_input', { param: 'input' });
  const model = CATALOG.find((entry) => entry.kind === 'moderation' && entry.model === (requested ?? DEFAULT_MODERATION_MODEL));
  if (!model) throw serviceError('invalid_request', { param: 'model', message: `model must be ${DEFAULT_MODERATION_MODEL}.` });
  const adapter = providers.adapter(model.provider);
  if (!adapter?.moderate) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return { model, adapter, input: inputs as string[] };
}
