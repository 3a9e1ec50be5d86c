import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import { countTokens, deterministicReply, replyTokens, sleep, streamPieces, type EmulatorOptions } from '../../core.js';

/**
 * What the four custom transports share: reading the prompt out of a chat body, the Anthropic
 * messages shapes (Bedrock and Vertex both carry them), and writing a stream chunk by chunk with
 * the configured interval and an optional injected disconnect.
 */

/** The text of a message's content: a string, or the `text` of each part (Anthropic, Converse, Gemini, OpenAI parts). */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((part) => (typeof part === 'string' ? part : typeof (part as { text?: unknown })?.text === 'string' ? (part as { text: string }).text : ''))
    .filter(Boolean)
    .join('\n');
}

/** The prompt a reply is derived from: system text, then every message's text, in order. */
export function promptOf(messages: readonly { content?: unknown; parts?: unknown }[], system?: unknown): string {
  const texts = [contentText(system), ...messages.map((message) => contentText(message.content ?? message.parts))];
  return texts.filter(Boolean).join('\n');
}

export interface Completion {
  text: string;
  finishReason: 'stop' | 'length';
  inputTokens: number;
  outputTokens: number;
}

export function complete(model: string, prompt: string, maxTokens: number | undefined): Completion {
  const { text, finishReason } = deterministicReply(model, prompt, maxTokens);
  return { text, finishReason, inputTokens: countTokens(prompt), outputTokens: replyTokens(text) };
}

export const randomId = (prefix: string, bytes = 12) => `${prefix}${randomBytes(bytes).toString('hex')}`;

/** An Anthropic messages body as Bedrock and Vertex accept it, or why it is malformed. */
export function parseAnthropicBody(body: unknown, anthropicVersion: string): { prompt: string; maxTokens: number } | { error: string } {
  const b = (body ?? {}) as { anthropic_version?: unknown; messages?: unknown; max_tokens?: unknown; system?: unknown };
  if (b.anthropic_version !== anthropicVersion) return { error: `anthropic_version: must be '${anthropicVersion}'` };
  if (!Array.isArray(b.messages) || b.messages.length === 0) return { error: 'messages: at least one message is required' };
  if (typeof b.max_tokens !== 'number' || !Number.isInteger(b.max_tokens) || b.max_tokens < 1) return { error: 'max_tokens: Field required' };
  return { prompt: promptOf(b.messages as { content?: unknown }[], b.system), maxTokens: b.max_tokens };
}

const stopReason = (completion: Completion) => (completion.finishReason === 'length' ? 'max_tokens' : 'end_turn');

export function anthropicMessage(id: string, model: string, completion: Completion) {
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: completion.text }],
    stop_reason: stopReason(completion),
    stop_sequence: null,
    usage: { input_tokens: completion.inputTokens, output_tokens: completion.outputTokens },
  };
}

/** The Anthropic streaming events, in order, each with its `type`. */
export function anthropicStreamEvents(id: string, model: string, completion: Completion): { type: string; [field: string]: unknown }[] {
  return [
    {
      type: 'message_start',
      message: { ...anthropicMessage(id, model, completion), content: [], stop_reason: null, usage: { input_tokens: completion.inputTokens, output_tokens: 1 } },
    },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    ...streamPieces(completion.text).map((text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })),
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: stopReason(completion), stop_sequence: null }, usage: { output_tokens: completion.outputTokens } },
    { type: 'message_stop' },
  ];
}

/**
 * Writes each chunk after the configured interval, waiting until it reached the socket. With an
 * injected disconnect, the connection is cut after `disconnectAfter` chunks, mid-stream.
 */
export async function writeChunks(req: Request, res: Response, chunks: readonly (string | Buffer)[], options: EmulatorOptions, disconnectAfter?: number): Promise<void> {
  for (const [index, chunk] of chunks.entries()) {
    if (disconnectAfter !== undefined && index >= disconnectAfter) {
      req.socket.destroy();
      return;
    }
    if (index > 0 && options.chunkIntervalMs > 0) await sleep(options.chunkIntervalMs);
    if (res.destroyed) return;
    await new Promise<void>((resolve) => res.write(chunk, () => resolve()));
  }
  res.end();
}

/** `event: <type>` + `data: <json>` frames, as Anthropic's SSE stream sends them. */
export const namedSseFrame = (event: { type: string }) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
