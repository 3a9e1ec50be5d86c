import type { MeteredCall } from '../billing/metered-call.js';
import { serviceError } from '../errors.js';
import { recordEvent } from '../events/outbox.js';
import type { GatewayServices } from '../composition/gateway.js';
import { UpstreamError, type Usage } from '../providers/types.js';
import type { SettlementEvent } from '../billing/meter.js';
import { chatFinishedEvent } from './chat-stream.js';
import { chatRequestFor, completionObject, newCompletionId, type ChatInput, type ChatTarget } from './chat.js';
import { checkAgainstSchema, reprompt, SCHEMA_REPROMPTS } from './json-schema.js';
import { messageTexts, moderateInline, moderates } from './moderations.js';
import { costMicros, estimatePromptTokens, maxCostMicros } from './pricing.js';
import { callUpstream, translateUpstream, UPSTREAM_DEADLINES_MS } from './upstream-call.js';

export interface CompleteChatOptions {
  /** Aborts the upstream call (the client went away, the batch was cancelled). */
  signal: AbortSignal;
  /**
   * Makes every charge of this completion idempotent: each metered attempt settles under
   * `<key>:<cascade position>:<attempt>`, so a completion run again (a batch line retried after a
   * worker died) is never charged twice for the same attempt.
   */
  billingKey?: string;
  /** Multiplies the provider price (batches from 10 requests up pay half). Default 1. */
  priceFactor?: number;
}

export interface CompletedChat {
  /** The chat.completion object, as sent to the caller. */
  body: ReturnType<typeof completionObject>;
  /** The cascade entry that answered. */
  target: ChatTarget;
  /** Concrete model ids tried, in order, the answering one last. */
  tried: string[];
  deductedMicros: number;
  balanceAfterMicros: number | null;
}

/**
 * A non-streaming chat completion, the same for a synchronous call and a batch line: each cascade
 * entry in turn, each reserved and settled on its own, the next (dearer) entry only when a
 * provider failed, never when the request itself was refused. chat.completion.finished commits
 * with the charge of the completion that answers (so a batch line run again records it once);
 * request.failed_after_retry is recorded when retries ran out.
 */
export async function completeChat(platform: GatewayServices, call: MeteredCall, input: ChatInput, targets: ChatTarget[], options: CompleteChatOptions): Promise<CompletedChat> {
  // Inline moderation of the prompt runs before any model is called, so a flagged prompt costs nothing.
  if (moderates(input.moderation, 'pre')) {
    await moderateInline(platform, call, messageTexts(input.messages), { stage: 'pre', signal: options.signal, chatModel: targets[0]?.resolution.model.id, ...(options.billingKey && { billingKey: options.billingKey }) });
  }
  const tried: string[] = [];
  const completionId = newCompletionId();
  for (const [position, target] of targets.entries()) {
    const model = target.resolution.model;
    tried.push(model.id);
    try {
      const settled = await completeWithModel(platform, call, input, target, options, position, (usage) => chatFinishedEvent(call, completionId, model.id, usage, [...tried]));
      // Post moderation checks what was generated; the completion stays billed (the provider did the work).
      if (moderates(input.moderation, 'post')) {
        const output = settled.result.content ?? '';
        await moderateInline(platform, call, output.trim() ? [output] : [], { stage: 'post', signal: options.signal, chatModel: model.id, ...(options.billingKey && { billingKey: options.billingKey }) });
      }
      const body = completionObject(completionId, Math.floor(Date.now() / 1000), model.id, settled.result);
      return { body, target, tried, deductedMicros: settled.deductedMicros, balanceAfterMicros: settled.balanceAfterMicros };
    } catch (error) {
      const cascades = error instanceof UpstreamError && (error.retryable || error.status === 401 || error.status === 403);
      if (cascades && position < targets.length - 1) continue;
      if (error instanceof UpstreamError) {
        platform.logger.warn({ err: error, request_id: call.requestId, model: model.id, tried }, 'upstream failed');
        if (error.retryable) {
          await recordEvent(platform.db, call.developerId, 'request.failed_after_retry', { request_id: call.requestId, models_tried: tried, customer_id: call.customer?.id ?? null, error: error.message });
        }
      }
      throw translateUpstream(error);
    }
  }
  throw new Error('a chat plan has at least one target');
}

/**
 * One model's completion, each attempt its own metered call. With a json_schema response format
 * the output is validated and re-prompted with what was wrong, at most SCHEMA_REPROMPTS times;
 * then 422 response_schema_validation_failed (the attempts made are billed: they were made).
 */
async function completeWithModel(
  platform: GatewayServices,
  call: MeteredCall,
  input: ChatInput,
  target: ChatTarget,
  options: CompleteChatOptions,
  position: number,
  finishedEvent: (usage: Usage) => SettlementEvent,
) {
  const model = target.resolution.model;
  const format = input.options.responseFormat;
  const factor = options.priceFactor ?? 1;
  const deadline = Date.now() + UPSTREAM_DEADLINES_MS.chat;
  let attemptInput = input;
  for (let attempt = 0; ; attempt++) {
    const reserve = Math.ceil(maxChatCostMicros(target, attemptInput) * factor);
    let check: ReturnType<typeof checkAgainstSchema> | undefined;
    const settled = await callUpstream(platform, call, {
      surface: 'chat',
      reserveMicros: reserve,
      signal: options.signal,
      deadline,
      // The cascade decides from the provider's failure whether the next model may answer.
      translate: false,
      attempt: async () => {
        const result = await target.adapter.chat!(chatRequestFor(target, attemptInput, options.signal));
        if (format?.type === 'json_schema' && !result.toolCalls?.length) check = checkAgainstSchema(result.content, format.json_schema.schema);
        return result;
      },
      meter: (result) => ({ model: model.id, costMicros: Math.round(costMicros(model, result.usage) * factor), tokensIn: result.usage.inputTokens, tokensOut: result.usage.outputTokens }),
      ...(options.billingKey && { idempotencyKey: `${options.billingKey}:${position}:${attempt}` }),
      // The attempt that answers the request records chat.completion.finished in its own charge's statement.
      events: (outcome) => (check === undefined || check.ok ? [finishedEvent(outcome.result.usage)] : []),
    });
    if (check === undefined || check.ok) return settled;
    if (attempt >= SCHEMA_REPROMPTS) throw serviceError('response_schema_validation_failed', { message: `The output did not match the json_schema after ${attempt + 1} attempts: ${check.problems}.` });
    attemptInput = { ...input, messages: reprompt(input.messages, settled.result.content, check.problems) };
  }
}

/** The most a call to this target can cost: the prompt plus max_tokens (or the model's ceiling). */
export function maxChatCostMicros(target: ChatTarget, input: ChatInput): number {
  const model = target.resolution.model;
  return maxCostMicros(model, estimatePromptTokens(input.messages), input.maxTokens ?? model.maxOutputTokens ?? 4096);
}
