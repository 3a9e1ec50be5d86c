import { randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import { countTokens, deterministicReply, replyTokens, sleep, streamPieces, type EmulatorOptions } from '../../core.js';
import { AUTO_CHOICE, plannedToolCalls, type OfferedTool, type ToolChoice } from '../../tool-calls.js';

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

export interface EmulatedToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface Completion {
  text: string;
  /** Present when the model answers with tool calls instead of text. */
  toolCalls?: EmulatedToolCall[];
  finishReason: 'stop' | 'length' | 'tool_calls';
  inputTokens: number;
  outputTokens: number;
}

/** What a request offers the model: its tools, its tool choice, and whether a tool result came last. */
export interface ToolOffer {
  tools: OfferedTool[];
  choice: ToolChoice;
  toolResultIsLast: boolean;
}

export function complete(model: string, prompt: string, maxTokens: number | undefined, offer?: ToolOffer): Completion {
  const calls = offer ? plannedToolCalls({ prompt, ...offer, seed: `${model}\n${prompt}` }) : [];
  if (calls.length > 0) {
    const toolCalls = calls.map((call) => ({ id: randomId('call_', 12), ...call }));
    return { text: '', toolCalls, finishReason: 'tool_calls', inputTokens: countTokens(prompt), outputTokens: countTokens(JSON.stringify(calls)) };
  }
  const { text, finishReason } = deterministicReply(model, prompt, maxTokens);
  return { text, finishReason, inputTokens: countTokens(prompt), outputTokens: replyTokens(text) };
}

const lastOf = (messages: unknown): Record<string, unknown> | undefined => (Array.isArray(messages) ? (messages.at(-1) as Record<string, unknown> | undefined) : undefined);
const blocksOf = (message: Record<string, unknown> | undefined): Record<string, unknown>[] => (Array.isArray(message?.content) ? (message.content as Record<string, unknown>[]) : []);
const record = (value: unknown): Record<string, unknown> => (value && typeof value === 'object' ? (value as Record<string, unknown>) : {});

/** Anthropic's `tools` and `tool_choice` ({type: auto | any | tool | none, name, disable_parallel_tool_use}). */
export function anthropicToolOffer(body: unknown): ToolOffer {
  const b = record(body);
  const tools = (Array.isArray(b.tools) ? b.tools : []).map((tool) => ({ name: String(record(tool).name), schema: record(tool).input_schema }));
  const choice = record(b.tool_choice);
  const parallel = choice.disable_parallel_tool_use !== true;
  const mode = choice.type === 'any' || choice.type === 'tool' ? 'required' : choice.type === 'none' ? 'none' : 'auto';
  return {
    tools,
    choice: { mode, parallel, ...(choice.type === 'tool' && { allowed: [String(choice.name)] }) },
    toolResultIsLast: blocksOf(lastOf(b.messages)).some((block) => block.type === 'tool_result'),
  };
}

/** Bedrock Converse's `toolConfig`: {tools: [{toolSpec}], toolChoice: {auto:{}} | {any:{}} | {tool:{name}}}. */
export function converseToolOffer(body: unknown): ToolOffer {
  const config = record(record(body).toolConfig);
  const tools = (Array.isArray(config.tools) ? config.tools : []).flatMap((tool) => {
    const spec = record(record(tool).toolSpec);
    return typeof spec.name === 'string' ? [{ name: spec.name, schema: record(spec.inputSchema).json }] : [];
  });
  const choice = record(config.toolChoice);
  const named = record(choice.tool).name;
  return {
    tools,
    // Converse has no `none`: a caller leaves the tools out instead.
    choice: choice.any ? { mode: 'required', parallel: true } : typeof named === 'string' ? { mode: 'required', allowed: [named], parallel: true } : AUTO_CHOICE,
    toolResultIsLast: blocksOf(lastOf(record(body).messages)).some((block) => block.toolResult !== undefined),
  };
}

/** Gemini's `tools[].functionDeclarations` and `toolConfig.functionCallingConfig` {mode: AUTO | ANY | NONE, allowedFunctionNames}. */
export function geminiToolOffer(body: unknown): ToolOffer {
  const b = record(body);
  const tools = (Array.isArray(b.tools) ? b.tools : []).flatMap((tool) =>
    (Array.isArray(record(tool).functionDeclarations) ? (record(tool).functionDeclarations as unknown[]) : []).map((declaration) => {
      const d = record(declaration);
      return { name: String(d.name), schema: d.parametersJsonSchema ?? d.parameters };
    }),
  );
  const config = record(record(b.toolConfig).functionCallingConfig);
  const allowed = Array.isArray(config.allowedFunctionNames) && config.allowedFunctionNames.length > 0 ? { allowed: config.allowedFunctionNames.map(String) } : {};
  const mode = config.mode === 'ANY' ? 'required' : config.mode === 'NONE' ? 'none' : 'auto';
  const parts = Array.isArray(lastOf(b.contents)?.parts) ? (lastOf(b.contents)!.parts as Record<string, unknown>[]) : [];
  return { tools, choice: { mode, parallel: true, ...allowed }, toolResultIsLast: parts.some((part) => part.functionResponse !== undefined) };
}

/**
 * OpenAI's `tools`, `tool_choice` (none | auto | required | {type: 'function', function: {name}}) and
 * `parallel_tool_calls`. watsonx sends a mode as `tool_choice_option` and a named function as `tool_choice`.
 */
export function openAiToolOffer(body: unknown): ToolOffer {
  const b = record(body);
  const tools = (Array.isArray(b.tools) ? b.tools : []).map((tool) => {
    const fn = record(record(tool).function);
    return { name: String(fn.name), schema: fn.parameters };
  });
  const choice = b.tool_choice ?? b.tool_choice_option ?? 'auto';
  const parallel = b.parallel_tool_calls !== false;
  const named = record(record(choice).function).name;
  const mode = choice === 'none' || choice === 'required' ? choice : typeof named === 'string' ? 'required' : 'auto';
  return { tools, choice: { mode, parallel, ...(typeof named === 'string' && { allowed: [named] }) }, toolResultIsLast: lastOf(b.messages)?.role === 'tool' };
}

/** OpenAI's tool_calls of a completion (Azure, watsonx). */
export const openAiToolCalls = (completion: Completion) =>
  completion.toolCalls?.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: JSON.stringify(call.arguments) } }));

/** OpenAI's streamed tool calls: per call, a delta with its id and name, then one with its arguments. */
export const openAiToolCallDeltas = (completion: Completion) =>
  (completion.toolCalls ?? []).flatMap((call, index) => [
    { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] },
    { tool_calls: [{ index, function: { arguments: JSON.stringify(call.arguments) } }] },
  ]);

export const randomId = (prefix: string, bytes = 12) => `${prefix}${randomBytes(bytes).toString('hex')}`;

/** An Anthropic messages body as Bedrock and Vertex accept it, or why it is malformed. */
export function parseAnthropicBody(body: unknown, anthropicVersion: string): { prompt: string; maxTokens: number } | { error: string } {
  const b = (body ?? {}) as { anthropic_version?: unknown; messages?: unknown; max_tokens?: unknown; system?: unknown };
  if (b.anthropic_version !== anthropicVersion) return { error: `anthropic_version: must be '${anthropicVersion}'` };
  if (!Array.isArray(b.messages) || b.messages.length === 0) return { error: 'messages: at least one message is required' };
  if (typeof b.max_tokens !== 'number' || !Number.isInteger(b.max_tokens) || b.max_tokens < 1) return { error: 'max_tokens: Field required' };
  return { prompt: promptOf(b.messages as { content?: unknown }[], b.system), maxTokens: b.max_tokens };
}

const stopReason = (completion: Completion) => (completion.toolCalls ? 'tool_use' : completion.finishReason === 'length' ? 'max_tokens' : 'end_turn');

const anthropicContent = (completion: Completion) =>
  completion.toolCalls ? completion.toolCalls.map((call) => ({ type: 'tool_use', id: call.id.replace(/^call_/, 'toolu_'), name: call.name, input: call.arguments })) : [{ type: 'text', text: completion.text }];

export function anthropicMessage(id: string, model: string, completion: Completion) {
  return {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: anthropicContent(completion),
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
    ...(completion.toolCalls
      ? anthropicContent(completion).flatMap((block, index) => {
          const { input, ...start } = block as { input: unknown };
          return [
            { type: 'content_block_start', index, content_block: { ...start, input: {} } },
            { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) } },
            { type: 'content_block_stop', index },
          ];
        })
      : [
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
          ...streamPieces(completion.text).map((text) => ({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })),
          { type: 'content_block_stop', index: 0 },
        ]),
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
