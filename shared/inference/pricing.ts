import type { CatalogModel } from '../models/catalog.js';
import type { ChatMessage, Usage } from '../providers/types.js';

/** Micro-dollars for tokens at a per-million price, rounded up so a call is never billed below cost. */
const priced = (tokens: number, microsPer1M: number) => Math.ceil((tokens * microsPer1M) / 1_000_000);

export function costMicros(model: CatalogModel, usage: Usage): number {
  return priced(usage.inputTokens, model.inputMicrosPer1M) + priced(usage.outputTokens, model.outputMicrosPer1M);
}

/** Four characters a token, an upper-side estimate of a prompt before the provider counts it. */
export function estimatePromptTokens(messages: ChatMessage[]): number {
  const text = messages.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content ?? ''))).join('\n');
  return Math.ceil(text.length / 4) + 4 * messages.length;
}

/** The most a call can cost: its prompt estimate plus every token it may generate. */
export function maxCostMicros(model: CatalogModel, promptTokens: number, maxOutputTokens: number): number {
  return costMicros(model, { inputTokens: promptTokens, outputTokens: maxOutputTokens });
}
