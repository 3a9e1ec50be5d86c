import { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import { CATALOG, type CatalogModel } from '../models/catalog.js';
import type { GatewayServices } from '../composition/gateway.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ChatMessage, ProviderAdapter } from '../providers/types.js';
import { newId } from '../ids.js';
import { callUpstream } from './upstream-call.js';

/** POST /v1/moderations, up to the provider call: metered at zero, so it is free but still recorded. */
export const DEFAULT_MODERATION_MODEL = 'omni-moderation-latest';

export const moderationsBody = z.object({ input: z.unknown().optional(), model: z.string().optional() });

export interface ModerationPlan {
  model: CatalogModel;
  adapter: ProviderAdapter;
  input: string[];
}

export type ModerationsRequest = z.output<typeof moderationsBody>;

/** Plans a request parsed by moderationsBody (the route builder, or a batch line through parseBody). */
export function planModeration(request: ModerationsRequest, providers: ProviderRegistry): ModerationPlan {
  const { input, model: requested } = request;
  if (input === undefined || input === '' || (Array.isArray(input) && input.length === 0)) throw serviceError('missing_input', { param: 'input' });
  const inputs = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(inputs) || inputs.some((entry) => typeof entry !== 'string')) throw serviceError('invalid_input', { param: 'input' });
  return { ...moderationModel(providers, requested), input: inputs as string[] };
}

type ModerationServices = Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>;

/**
 * One moderation call, metered at zero: nothing is reserved or charged, but the call is recorded
 * like any other. The same for POST /v1/moderations, a batch line and inline moderation.
 */
export async function moderate(platform: ModerationServices, call: MeteredCall, plan: ModerationPlan, options: { signal: AbortSignal; billingKey?: string }) {
  const settled = await callUpstream(platform, call, {
    surface: 'moderation',
    reserveMicros: 0,
    signal: options.signal,
    attempt: () => plan.adapter.moderate!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, signal: options.signal }),
    meter: () => ({ model: plan.model.id, costMicros: 0, tokensIn: 0, tokensOut: 0 }),
    ...(options.billingKey && { idempotencyKey: options.billingKey }),
  });
  return { id: newId('modr-'), model: plan.model.model, results: settled.result.results };
}

function moderationModel(providers: ProviderRegistry, requested = DEFAULT_MODERATION_MODEL): { model: CatalogModel; adapter: ProviderAdapter } {
  const model = CATALOG.find((entry) => entry.kind === 'moderation' && entry.model === requested);
  if (!model) throw serviceError('invalid_request', { param: 'model', message: `model must be ${DEFAULT_MODERATION_MODEL}.` });
  const adapter = providers.adapter(model.provider);
  if (!adapter?.moderate) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return { model, adapter };
}

/**
 * Inline moderation of chat completions (body field `moderation`): `pre` checks the prompt before
 * any model is called, `post` checks the completion after it was generated (and billed: the
 * provider did the work), `pre_and_post` both. With `stream: true` only `pre` is possible, since a
 * streamed completion reaches the caller before it could be checked whole.
 */
export type InlineModeration = 'none' | 'pre' | 'post' | 'pre_and_post';
export type ModerationStage = 'pre' | 'post';

export const moderates = (mode: InlineModeration | undefined, stage: ModerationStage) => mode === stage || mode === 'pre_and_post';

/** The text of each message (string content and text parts), one moderation input per message. */
export function messageTexts(messages: ChatMessage[]): string[] {
  return messages
    .map((message) =>
      typeof message.content === 'string'
        ? message.content
        : (message.content ?? []).flatMap((part) => (part.type === 'text' && typeof part.text === 'string' ? [part.text] : [])).join('\n'),
    )
    .filter((text) => text.trim() !== '');
}

export interface InlineModerationContext {
  stage: ModerationStage;
  signal: AbortSignal;
  /** The chat model the text goes to (pre) or came from (post), for the event. */
  chatModel?: string;
  /** Makes the zero-cost usage record idempotent (batch lines run again after a crash). */
  billingKey?: string;
}

/**
 * Moderates `texts` through the platform's moderation provider, as a call metered at zero (a usage
 * record, no charge). Flagged → moderation.flagged through the outbox, then 400 moderation_flagged.
 * A moderation provider that fails fails the call (503): asked-for moderation is never skipped.
 */
export async function moderateInline(platform: Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants' | 'providers'>, call: MeteredCall, texts: string[], context: InlineModerationContext): Promise<void> {
  if (texts.length === 0) return;
  const plan = { ...moderationModel(platform.providers), input: texts };
  const moderation = await moderate(platform, call, plan, { signal: context.signal, ...(context.billingKey && { billingKey: `${context.billingKey}:moderation:${context.stage}` }) });
  const flagged = moderation.results.filter((result) => result.flagged);
  if (flagged.length === 0) return;
  const categories = [...new Set(flagged.flatMap((result) => Object.entries(result.categories).flatMap(([name, hit]) => (hit ? [name] : []))))].sort();
  await recordEvent(platform.db, call.developerId, 'moderation.flagged', {
    request_id: call.requestId,
    stage: context.stage,
    categories,
    customer_id: call.customer?.id ?? null,
    model: context.chatModel ?? null,
    moderation_model: plan.model.id,
    flagged_inputs: flagged.length,
  });
  const what = context.stage === 'pre' ? 'prompt' : 'completion';
  throw serviceError('moderation_flagged', { message: `Inline moderation flagged the ${what}${categories.length ? ` (${categories.join(', ')})` : ''}.` });
}
