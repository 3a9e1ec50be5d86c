import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { CATALOG, type ModelKind } from '../../../models/catalog.js';
import { applyFault, countTokens, deterministicEmbedding, deterministicReply, relevance, replyTokens, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { plannedToolCalls } from '../../tool-calls.js';
import { modelOf, namedEvent, parseBody, valueForSchema, writeFrames, type StreamFrame } from './wire.js';

/**
 * Cohere's v2 API (https://api.cohere.com/v2/{chat,embed,rerank}) under `/cohere`, with a Bearer
 * key. Errors are Cohere's bare `{message}` with the status.
 */

const PROVIDER = 'cohere';
const modelsOf = (kind: ModelKind) => new Map(CATALOG.filter((model) => model.provider === PROVIDER && model.kind === kind).map((model) => [model.model, model]));
const CHAT_MODELS = modelsOf('chat');
const EMBEDDING_MODELS = modelsOf('embedding');
const RERANK_MODELS = modelsOf('rerank');
const MAX_EMBED_TEXTS = 96;
const RERANK_DOCUMENTS_PER_SEARCH_UNIT = 100;
const API_VERSION = { version: '2' };

const MESSAGE_BY_STATUS: Record<number, string> = {
  400: 'invalid request',
  401: 'invalid api token',
  404: 'not found',
  429: 'You are past the per minute request limit, please wait and try again later.',
  500: 'internal server error, this has been reported to our developers',
  503: 'service unavailable',
};

const errorBody = (status: number, message?: string) => ({ message: message ?? MESSAGE_BY_STATUS[status] ?? 'request failed' });

function sendError(res: Response, status: number, message?: string): void {
  res.status(status).json(errorBody(status, message));
}

const TextContent = z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]);

const ChatRequest = z.looseObject({
  model: z.string(),
  messages: z
    .array(z.looseObject({ role: z.enum(['system', 'user', 'assistant', 'tool']), content: TextContent.optional(), tool_call_id: z.string().optional() }))
    .min(1),
  tools: z.array(z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string(), parameters: z.unknown().optional() }) })).optional(),
  tool_choice: z.enum(['REQUIRED', 'NONE']).optional(),
  stream: z.boolean().optional(),
  max_tokens: z.number().int().min(1).optional(),
  response_format: z.looseObject({ type: z.enum(['text', 'json_object']), json_schema: z.unknown().optional() }).optional(),
  temperature: z.number().min(0).optional(),
});
type ChatRequest = z.infer<typeof ChatRequest>;

const EMBEDDING_TYPES = ['float', 'int8', 'uint8', 'binary', 'ubinary', 'base64'] as const;
type EmbeddingType = (typeof EMBEDDING_TYPES)[number];

const EmbedRequest = z.looseObject({
  model: z.string(),
  texts: z.array(z.string()).min(1).max(MAX_EMBED_TEXTS),
  input_type: z.enum(['search_document', 'search_query', 'classification', 'clustering']),
  embedding_types: z.array(z.enum(EMBEDDING_TYPES)).min(1).default(['float']),
  truncate: z.enum(['NONE', 'START', 'END']).optional(),
});

const RerankRequest = z.looseObject({
  model: z.string(),
  query: z.string().min(1),
  documents: z.array(z.union([z.string(), z.looseObject({ text: z.string() })])).min(1),
  top_n: z.number().int().min(1).optional(),
});

const contentText = (content: z.infer<typeof TextContent> | undefined) =>
  typeof content === 'string' ? content : (content ?? []).map((block) => block.text ?? '').join('\n');

interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

interface Reply {
  text?: string;
  toolPlan?: string;
  toolCalls?: ToolCall[];
  finishReason: 'COMPLETE' | 'MAX_TOKENS' | 'TOOL_CALL';
  inputTokens: number;
  outputTokens: number;
}

/**
 * Tool calls when `tool_choice: REQUIRED` or the prompt's marker asks (and no tool result came back
 * yet), never with `NONE`; JSON in JSON mode; else text.
 */
function replyTo(request: ChatRequest): Reply {
  const prompt = request.messages.map((message) => contentText(message.content)).filter(Boolean).join('\n');
  const inputTokens = countTokens(prompt);
  const calls = plannedToolCalls({
    prompt,
    tools: (request.tools ?? []).map((tool) => ({ name: tool.function.name, schema: tool.function.parameters })),
    choice: { mode: request.tool_choice === 'REQUIRED' ? 'required' : request.tool_choice === 'NONE' ? 'none' : 'auto', parallel: true },
    toolResultIsLast: request.messages.at(-1)!.role === 'tool',
    seed: `${request.model}\n${prompt}`,
  });
  if (calls.length > 0) {
    const toolPlan = `I will call ${calls.map((call) => call.name).join(' and ')}.`;
    const toolCalls: ToolCall[] = calls.map((call) => ({ id: `${call.name}_${randomUUID().slice(0, 8)}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }));
    return { toolPlan, toolCalls, finishReason: 'TOOL_CALL', inputTokens, outputTokens: countTokens(toolPlan + toolCalls.map((call) => call.function.arguments).join('')) };
  }
  if (request.response_format?.type === 'json_object') {
    const schema = request.response_format.json_schema;
    const text = JSON.stringify(schema ? valueForSchema(schema, `${request.model}\n${prompt}`) : { text: deterministicReply(request.model, prompt).text });
    return { text, finishReason: 'COMPLETE', inputTokens, outputTokens: countTokens(text) };
  }
  const { text, finishReason } = deterministicReply(request.model, prompt, request.max_tokens);
  return { text, finishReason: finishReason === 'length' ? 'MAX_TOKENS' : 'COMPLETE', inputTokens, outputTokens: replyTokens(text) };
}

const usageOf = (reply: Reply) => ({
  billed_units: { input_tokens: reply.inputTokens, output_tokens: reply.outputTokens },
  tokens: { input_tokens: reply.inputTokens, output_tokens: reply.outputTokens },
});

function streamFrames(id: string, reply: Reply): StreamFrame[] {
  const frames: StreamFrame[] = [];
  const event = (type: string, data: Record<string, unknown>, delta = false) => frames.push({ text: namedEvent(type, { type, ...data }), delta });
  event('message-start', { id, delta: { message: { role: 'assistant', content: [], tool_plan: '', tool_calls: [], citations: [] } } });
  if (reply.toolCalls) {
    event('tool-plan-delta', { delta: { message: { tool_plan: reply.toolPlan } } }, true);
    reply.toolCalls.forEach((call, index) => {
      event('tool-call-start', { index, delta: { message: { tool_calls: { id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } } } } });
      event('tool-call-delta', { index, delta: { message: { tool_calls: { function: { arguments: call.function.arguments } } } } }, true);
      event('tool-call-end', { index });
    });
  } else {
    event('content-start', { index: 0, delta: { message: { content: { type: 'text', text: '' } } } });
    for (const piece of streamPieces(reply.text ?? '')) event('content-delta', { index: 0, delta: { message: { content: { text: piece } } } }, true);
    event('content-end', { index: 0 });
  }
  event('message-end', { delta: { finish_reason: reply.finishReason, usage: usageOf(reply) } });
  frames.push({ text: 'data: [DONE]\n\n' });
  return frames;
}

/** Cohere's compressed embedding types, derived from the float embedding. */
function embeddingAs(type: EmbeddingType, values: number[]): number[] | string {
  // A unit vector of 1024 floats has components near ±0.03; the scale spreads them over the int8 range.
  const scaled = values.map((value) => Math.max(-128, Math.min(127, Math.round(value * 127 * 8))));
  const packBits = () => Array.from({ length: Math.ceil(values.length / 8) }, (_, byte) => values.slice(byte * 8, byte * 8 + 8).reduce((bits, value, bit) => bits | ((value > 0 ? 1 : 0) << (7 - bit)), 0));
  switch (type) {
    case 'float':
      return values;
    case 'int8':
      return scaled;
    case 'uint8':
      return scaled.map((value) => value + 128);
    case 'ubinary':
      return packBits();
    case 'binary':
      return packBits().map((value) => value - 128);
    case 'base64':
      return Buffer.from(new Float32Array(values).buffer).toString('base64');
  }
}

function authenticate(options: EmulatorOptions) {
  return (req: Request, res: Response, next: NextFunction) => {
    const match = /^bearer\s+(.+)$/i.exec(req.header('authorization') ?? '');
    if (!match) return sendError(res, 401, 'no api key supplied');
    if (match[1] !== options.credentials.apiKeys[PROVIDER]) return sendError(res, 401, 'invalid api token');
    next();
  };
}

const modelNotFound = (model: string) => `model '${model}' not found, make sure the correct model ID was used and that you have access to the model.`;

/** Parses a body and checks its model is one this endpoint serves; answers the error itself when not. */
function validRequest<T extends { model: string }>(schema: z.ZodType<T>, models: Map<string, unknown>, req: Request, res: Response): T | undefined {
  const parsed = parseBody(schema, req.body);
  if (!parsed.ok) return void sendError(res, 400, `invalid request: ${parsed.message}`);
  if (!models.has(parsed.value.model)) return void sendError(res, 404, modelNotFound(parsed.value.model));
  return parsed.value;
}

export const cohereStyle: EmulatorStyle = {
  mount(app, { faults, options }: { faults: FaultRegistry; options: EmulatorOptions }) {
    const router = express.Router();
    router.use(express.json({ limit: '32mb' }));
    router.use(authenticate(options));
    const fault = (req: Request, res: Response) => applyFault(req, res, { faults, options, provider: PROVIDER, model: modelOf(req.body), errorBody: (status) => errorBody(status) });

    router.post('/v2/chat', async (req, res) => {
      const applied = await fault(req, res);
      if (!applied.proceed) return;
      const request = validRequest(ChatRequest, CHAT_MODELS, req, res);
      if (!request) return;
      const reply = replyTo(request);
      const id = randomUUID();
      if (request.stream) return writeFrames(req, res, streamFrames(id, reply), { emulator: options, disconnectAfter: applied.disconnectAfter });
      const message = reply.toolCalls
        ? { role: 'assistant', tool_plan: reply.toolPlan, tool_calls: reply.toolCalls }
        : { role: 'assistant', content: [{ type: 'text', text: reply.text }] };
      res.json({ id, finish_reason: reply.finishReason, message, usage: usageOf(reply) });
    });

    router.post('/v2/embed', async (req, res) => {
      if (!(await fault(req, res)).proceed) return;
      const request = validRequest(EmbedRequest, EMBEDDING_MODELS, req, res);
      if (!request) return;
      const dimensions = EMBEDDING_MODELS.get(request.model)!.dimensions!;
      // input_type is required but does not change the vector, so a text embedded as a document and as a query match exactly.
      const floats = request.texts.map((text) => deterministicEmbedding(request.model, text, dimensions));
      res.json({
        id: randomUUID(),
        embeddings: Object.fromEntries(request.embedding_types.map((type) => [type, floats.map((values) => embeddingAs(type, values))])),
        texts: request.texts,
        meta: { api_version: API_VERSION, billed_units: { input_tokens: request.texts.reduce((sum, text) => sum + countTokens(text), 0) } },
        response_type: 'embeddings_by_type',
      });
    });

    router.post('/v2/rerank', async (req, res) => {
      if (!(await fault(req, res)).proceed) return;
      const request = validRequest(RerankRequest, RERANK_MODELS, req, res);
      if (!request) return;
      const results = request.documents
        .map((document, index) => ({ index, relevance_score: relevance(request.query, typeof document === 'string' ? document : document.text) }))
        .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
        .slice(0, request.top_n ?? request.documents.length);
      res.json({
        id: randomUUID(),
        results,
        meta: { api_version: API_VERSION, billed_units: { search_units: Math.ceil(request.documents.length / RERANK_DOCUMENTS_PER_SEARCH_UNIT) } },
      });
    });

    router.use((_req, res) => sendError(res, 404, 'not found'));
    router.use((error: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
      if (error.type === 'entity.too.large') return sendError(res, 413, 'request body too large');
      if (error.status === 400 || error.type === 'entity.parse.failed') return sendError(res, 400, 'invalid request: could not parse the request body as JSON');
      sendError(res, 500);
    });

    app.use(`/${PROVIDER}`, router);
    return [PROVIDER];
  },
};
