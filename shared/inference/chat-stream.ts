import { billableAmount, type SettlementEvent } from '../billing/meter.js';
import { authorizeCall, releaseCall, settleCall, type MeteredCall, type MeteredHold } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import type { ChatStreamEvent, Usage } from '../providers/types.js';
import { chatRequestFor, type ChatInput, type ChatTarget } from './chat.js';
import { costMicros, estimatePromptTokens, maxCostMicros } from './pricing.js';
import { withRetries } from './upstream-call.js';

/**
 * The money side of a streamed completion. `open` reserves the call's maximum cost and starts the
 * upstream stream (retried until its `opened` event; a stream that never opens gives its
 * reservation back). `finish` settles for what was generated: the provider's count, or an
 * estimate when the stream was cut by the upstream or by the client going away.
 */
export class MeteredChatStream {
  private generated = '';
  private usage: Usage | undefined;

  private constructor(
    private readonly platform: GatewayServices,
    private readonly call: MeteredCall,
    private readonly target: ChatTarget,
    private readonly input: ChatInput,
    private readonly hold: MeteredHold,
    private readonly upstream: AsyncIterable<ChatStreamEvent>,
  ) {}

  static async open(platform: GatewayServices, call: MeteredCall, target: ChatTarget, input: ChatInput, signal: AbortSignal, deadline: number): Promise<MeteredChatStream> {
    const model = target.resolution.model;
    const { hold, call: current } = await authorizeCall(platform, call, maxCostMicros(model, estimatePromptTokens(input.messages), input.maxTokens ?? model.maxOutputTokens ?? 4096));
    call = current;
    try {
      const upstream = await withRetries(() => firstEvent(target.adapter.chatStream!(chatRequestFor(target, input, signal))), deadline, signal);
      return new MeteredChatStream(platform, call, target, input, hold, upstream);
    } catch (error) {
      await releaseCall(platform, hold);
      throw error;
    }
  }

  /** The upstream events, counted as they pass. */
  async *events(): AsyncGenerator<ChatStreamEvent> {
    for await (const event of this.upstream) {
      if (event.type === 'delta' && event.content) this.generated += event.content;
      if (event.type === 'usage') this.usage = event.usage;
      yield event;
    }
  }

  /** Settles the call; `completed` says whether the stream reached its end (for the event). */
  async finish(completed: boolean, completionId: string): Promise<Usage> {
    const model = this.target.resolution.model;
    const charged = this.usage ?? { inputTokens: estimatePromptTokens(this.input.messages), outputTokens: Math.ceil(this.generated.length / 4) };
    const cost = costMicros(model, charged);
    await settleCall(this.platform, this.hold, {
      costMicros: cost,
      billableMicros: billableAmount(cost, this.call.customer, this.call.billableOverrideMicros),
      model: model.id,
      tokensIn: charged.inputTokens,
      tokensOut: charged.outputTokens,
      requestId: this.call.requestId,
      events: completed ? [chatFinishedEvent(this.call, completionId, model.id, charged, [model.id])] : [],
    });
    this.platform.limiter.recordUsage(this.call.tokenCounterKeys, charged.inputTokens + charged.outputTokens);
    return charged;
  }
}

/** chat.completion.finished, committed with the completion's charge (Settlement.events). */
export function chatFinishedEvent(call: Pick<MeteredCall, 'customer' | 'requestId'>, completionId: string, model: string, usage: Usage, tried: string[]): SettlementEvent {
  return {
    type: 'chat.completion.finished',
    data: {
      request_id: call.requestId,
      completion_id: completionId,
      model,
      customer_id: call.customer?.id ?? null,
      usage: { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens },
      ...(tried.length > 1 && { models_tried: tried }),
    },
  };
}

/**
 * Pulls a stream's first event, `opened` (connection, auth and first-frame failures surface before
 * it), then hands back the whole stream.
 */
async function firstEvent(stream: AsyncIterable<ChatStreamEvent>): Promise<AsyncIterable<ChatStreamEvent>> {
  const iterator = stream[Symbol.asyncIterator]();
  const first = await iterator.next();
  return {
    async *[Symbol.asyncIterator]() {
      if (!first.done) yield first.value;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    },
  };
}
