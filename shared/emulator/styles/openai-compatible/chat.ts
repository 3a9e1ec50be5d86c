import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { countTokens, deterministicReply, replyTokens, sleep, startEventStream, streamPieces } from '../../core.js';
import { answerMemoryLearning } from '../../memory-learning.js';
import { plannedToolCalls, type ToolChoice } from '../../tool-calls.js';
import { parseBody, type Endpoint, type EndpointCall } from './endpoint.js';
import { valueForSchema, violatingValue } from './json-schema.js';

/**
 * `POST .../chat/completions`: OpenAI's chat.completion object, or its chat.completion.chunk
 * server-sent events with `stream: true`. Tools are called as `tool_choice` and
 * `parallel_tool_calls` say (../../tool-calls.ts). Test hooks in the prompt: `EMULATOR_CALL_TOOL` (with
 * `tools`) answers with a call to the first tool, `EMULATOR_BREAK_SCHEMA` (with a json_schema
 * response format) answers with JSON that violates the schema, `EMULATOR_SAY_FLAG` makes the reply
 * start with the word `EMULATOR_FLAG` (which the moderations endpoint flags), so a test can have
 * a completion flagged while its prompt is not. A json_schema response format named for one of the
 * platform's memory-learning prompts (`brain_memory_extraction`, `brain_memory_judgement`,
 * `brain_memory_consolidation`) is answered by the rules of ../../memory-learning.ts, read from the
 * last user message, so brain learning has exact expected memories offline.
 */

/** A fixed prompt-token charge per image part, as for a low-detail image upstream. */
const IMAGE_TOKENS = 85;

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const Message = z.looseObject({
  role: z.string(),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
});
const Tool = z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string(), parameters: z.unknown().optional() }) });
const NamedFunction = z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) });
const ToolChoiceField = z.union([
  z.enum(['none', 'auto', 'required']),
  NamedFunction,
  z.looseObject({ type: z.literal('allowed_tools'), allowed_tools: z.looseObject({ mode: z.enum(['auto', 'required']), tools: z.array(NamedFunction) }) }),
]);

const ChatRequest = z.looseObject({
  model: z.string(),
  messages: z.array(Message).min(1),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  tools: z.array(Tool).nullish(),
  tool_choice: ToolChoiceField.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: z
    .looseObject({ type: z.string(), json_schema: z.looseObject({ name: z.string().optional(), schema: z.record(z.string(), z.unknown()).optional() }).optional() })
    .nullish(),
});
type ChatRequest = z.infer<typeof ChatRequest>;

interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

interface ChatAnswer {
  content: string | null;
  toolCalls?: ToolCall[];
  finishReason: 'stop' | 'length' | 'tool_calls';
  promptTokens: number;
  completionTokens: number;
}

/** The text a provider would read: every message's text, and a fixed charge for each image. */
function readPrompt(messages: ChatRequest['messages']): { text: string; imageTokens: number } {
  const texts: string[] = [];
  let imageTokens = 0;
  for (const message of messages) {
    if (typeof message.content === 'string') texts.push(message.content);
    for (const part of Array.isArray(message.content) ? message.content : []) {
      if (part.type === 'text' && part.text !== undefined) texts.push(part.text);
      if (part.type === 'image_url' || part.type === 'input_image') imageTokens += IMAGE_TOKENS;
    }
  }
  return { text: texts.join('\n'), imageTokens };
}

/** The text of the last user message: its string content, or its text parts one per line. */
function lastUserText(messages: ChatRequest['messages']): string {
  const content = messages.findLast((message) => message.role === 'user')?.content;
  if (typeof content === 'string') return content;
  return (content ?? []).flatMap((part) => (part.type === 'text' && part.text !== undefined ? [part.text] : [])).join('\n');
}

/** OpenAI's tool_choice (`auto` by default) and parallel_tool_calls (true by default). */
function toolChoiceOf(request: ChatRequest): ToolChoice {
  const choice = request.tool_choice ?? 'auto';
  const parallel = request.parallel_tool_calls !== false;
  if (typeof choice === 'string') return { mode: choice, parallel };
  if (choice.type === 'function') return { mode: 'required', allowed: [choice.function.name], parallel };
  return { mode: choice.allowed_tools.mode, allowed: choice.allowed_tools.tools.map((tool) => tool.function.name), parallel };
}

function answer(request: ChatRequest): ChatAnswer {
  const prompt = readPrompt(request.messages);
  const promptTokens = countTokens(prompt.text) + prompt.imageTokens;
  const calls = plannedToolCalls({
    prompt: prompt.text,
    tools: (request.tools ?? []).map((tool) => ({ name: tool.function.name, schema: tool.function.parameters })),
    choice: toolChoiceOf(request),
    // After the tool's result comes back the model answers in text, so an agent loop ends.
    toolResultIsLast: request.messages.at(-1)?.role === 'tool',
    seed: `${request.model}\n${prompt.text}`,
  });
  if (calls.length > 0) {
    const toolCalls: ToolCall[] = calls.map((call) => ({ id: `call_${randomId(24)}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }));
    return { content: null, toolCalls, finishReason: 'tool_calls', promptTokens, completionTokens: countTokens(toolCalls.map((call) => call.function.name + call.function.arguments).join('')) };
  }
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined;
  const reply = deterministicReply(request.model, prompt.text, maxTokens);
  const format = request.response_format;
  if (format?.type === 'json_schema') {
    const schema = format.json_schema?.schema ?? {};
    const seed = `${request.model}\n${prompt.text}`;
    const value =
      answerMemoryLearning(format.json_schema?.name, lastUserText(request.messages)) ??
      (prompt.text.includes('EMULATOR_BREAK_SCHEMA') ? violatingValue(schema, seed) : valueForSchema(schema, seed));
    const content = JSON.stringify(value);
    return { content, finishReason: 'stop', promptTokens, completionTokens: countTokens(content) };
  }
  if (format?.type === 'json_object') {
    const content = JSON.stringify({ reply: reply.text });
    return { content, finishReason: 'stop', promptTokens, completionTokens: countTokens(content) };
  }
  const text = prompt.text.includes('EMULATOR_SAY_FLAG') ? `EMULATOR_FLAG ${reply.text}` : reply.text;
  return { content: text, finishReason: reply.finishReason, promptTokens, completionTokens: replyTokens(text) };
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function randomId(length: number): string {
  return Array.from(randomBytes(length), (byte) => ID_ALPHABET[byte % ID_ALPHABET.length]).join('');
}

/** Stable per model, as a deployment's fingerprint is. */
const fingerprint = (model: string) => `fp_${createHash('sha256').update(model).digest('hex').slice(0, 10)}`;

function usageOf(result: ChatAnswer) {
  return { prompt_tokens: result.promptTokens, completion_tokens: result.completionTokens, total_tokens: result.promptTokens + result.completionTokens };
}

async function streamAnswer(call: EndpointCall, request: ChatRequest, result: ChatAnswer): Promise<void> {
  const { res, options } = call;
  const includeUsage = request.stream_options?.include_usage === true;
  const head = { id: `chatcmpl-${randomId(29)}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: request.model, system_fingerprint: fingerprint(request.model) };
  // With include_usage every chunk carries `usage: null` until the last one, as upstream sends it.
  const chunk = (choices: unknown[], usage: unknown = null) => `data: ${JSON.stringify({ ...head, choices, ...(includeUsage ? { usage } : {}) })}\n\n`;
  const choice = (delta: unknown, finishReason: string | null = null) => ({ index: 0, delta, logprobs: null, finish_reason: finishReason });

  let closed = false;
  const closing = new Promise<void>((resolve) =>
    res.once('close', () => {
      closed = true;
      resolve();
    }),
  );
  // Each write is awaited (until the caller goes away) so that a disconnect fault drops the
  // connection only after the chunks before it were really sent.
  const send = (data: string) => Promise.race([new Promise<void>((resolve) => res.write(data, () => resolve())), closing]);
  startEventStream(res);
  await send(chunk([choice({ role: 'assistant', content: result.toolCalls ? null : '', refusal: null })]));

  // Each call opens with its id and name, then its arguments follow, as OpenAI streams them.
  const deltas: unknown[] = result.toolCalls
    ? result.toolCalls.flatMap((call, index) => [
        { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] },
        { tool_calls: [{ index, function: { arguments: call.function.arguments } }] },
      ])
    : streamPieces(result.content ?? '').map((piece) => ({ content: piece }));
  // A disconnect fault always takes effect, even when the answer is shorter than asked.
  const disconnectAt = call.disconnectAfter === undefined ? undefined : Math.min(call.disconnectAfter, deltas.length);
  let sent = 0;
  for (const delta of deltas) {
    if (disconnectAt !== undefined && sent >= disconnectAt) break;
    if (options.chunkIntervalMs > 0) await sleep(options.chunkIntervalMs);
    if (closed) {
      call.noteAbandoned?.(sent);
      return;
    }
    await send(chunk([choice(delta)]));
    sent += 1;
  }
  if (disconnectAt !== undefined) {
    call.req.socket.destroy();
    return;
  }
  if (options.chunkIntervalMs > 0) await sleep(options.chunkIntervalMs);
  if (closed) return;
  await send(chunk([choice({}, result.finishReason)]));
  if (includeUsage) await send(chunk([], usageOf(result)));
  res.end('data: [DONE]\n\n');
}

export const chatCompletions: Endpoint = {
  path: '/chat/completions',
  kind: 'chat',
  async handle(call) {
    const request = parseBody(ChatRequest, call.body);
    const result = answer(request);
    if (request.stream) return streamAnswer(call, request, result);
    const message = { role: 'assistant', content: result.content, refusal: null, ...(result.toolCalls ? { tool_calls: result.toolCalls } : {}) };
    call.res.json({
      id: `chatcmpl-${randomId(29)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: request.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: result.finishReason }],
      usage: usageOf(result),
      system_fingerprint: fingerprint(request.model),
    });
  },
};
