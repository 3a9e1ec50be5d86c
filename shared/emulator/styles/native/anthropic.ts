import { randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, countTokens, deterministicReply, replyTokens, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { plannedToolCalls, type ToolChoice } from '../../tool-calls.js';
import { modelOf, namedEvent, parseBody, sha256, writeFrames, type StreamFrame } from './wire.js';

/**
 * Anthropic's Messages API (https://api.anthropic.com/v1/messages) under `/anthropic`, with
 * prompt caching: a prefix ending at a `cache_control` block is written on first sight and read
 * while its TTL lasts, so the gateway's prompt-cache accounting can be tested.
 */

const PROVIDER = 'anthropic';
const MODELS = new Map(CATALOG.filter((model) => model.provider === PROVIDER && model.kind === 'chat').map((model) => [model.model, model]));
const MAX_CACHE_BREAKPOINTS = 4;
/** Past this many cached prefixes, expired ones are swept, so a long benchmark does not grow the map forever. */
const MAX_CACHE_ENTRIES = 10_000;
/** An image costs about (width × height) / 750 tokens; this is a full-size one, so base64 bytes are not counted as text. */
const IMAGE_TOKENS = 1_600;
const TTL_MS = { '5m': 5 * 60_000, '1h': 60 * 60_000 } as const;

type ErrorType = 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'not_found_error' | 'request_too_large' | 'rate_limit_error' | 'api_error' | 'overloaded_error';

const ERROR_TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  529: 'overloaded_error',
};

const ERROR_MESSAGE_BY_TYPE: Record<ErrorType, string> = {
  invalid_request_error: 'Invalid request.',
  authentication_error: 'invalid x-api-key',
  permission_error: 'Your API key does not have permission to use the specified resource.',
  not_found_error: 'Not found',
  request_too_large: 'Request exceeds the maximum allowed number of bytes.',
  rate_limit_error: 'Number of request tokens has exceeded your per-minute rate limit',
  api_error: 'Internal server error',
  overloaded_error: 'Overloaded',
};

function errorBody(status: number, message?: string) {
  const type = ERROR_TYPE_BY_STATUS[status] ?? 'api_error';
  return { type: 'error', error: { type, message: message ?? ERROR_MESSAGE_BY_TYPE[type] } };
}

function sendError(res: Response, status: number, message?: string): void {
  res.status(status).json(errorBody(status, message));
}

const CacheControl = z.looseObject({ type: z.literal('ephemeral'), ttl: z.enum(['5m', '1h']).optional() });
const ContentBlock = z.looseObject({ type: z.string(), cache_control: CacheControl.nullish() });
const SystemBlock = z.looseObject({ type: z.literal('text'), text: z.string(), cache_control: CacheControl.nullish() });

const MessagesRequest = z.looseObject({
  model: z.string(),
  max_tokens: z.number().int().min(1),
  messages: z.array(z.looseObject({ role: z.enum(['user', 'assistant']), content: z.union([z.string(), z.array(ContentBlock)]) })).min(1),
  system: z.union([z.string(), z.array(SystemBlock)]).optional(),
  tools: z.array(z.looseObject({ name: z.string(), input_schema: z.unknown().optional(), cache_control: CacheControl.nullish() })).optional(),
  tool_choice: z
    .looseObject({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional(), disable_parallel_tool_use: z.boolean().optional() })
    .refine((choice) => choice.type !== 'tool' || choice.name !== undefined, { message: 'name: Field required', path: ['name'] })
    .optional(),
  stop_sequences: z.array(z.string()).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(1).optional(),
});
type MessagesRequest = z.infer<typeof MessagesRequest>;
type Block = z.infer<typeof ContentBlock>;

const CountTokensRequest = MessagesRequest.omit({ max_tokens: true });

/** The readable text of a content block: what the deterministic reply is computed from. */
function blockText(block: Block): string {
  const value = block as Block & { text?: unknown; content?: unknown; input?: unknown };
  if (block.type === 'text' && typeof value.text === 'string') return value.text;
  if (block.type === 'tool_result') {
    if (typeof value.content === 'string') return value.content;
    if (Array.isArray(value.content)) return (value.content as Block[]).map(blockText).join('\n');
  }
  if (block.type === 'tool_use') return JSON.stringify(value.input ?? {});
  return '';
}

const withoutCacheControl = ({ cache_control: _ignored, ...rest }: { cache_control?: unknown }) => rest;

/** The request in Anthropic's cache order (tools, system, messages), one segment per block. */
interface Segment {
  key: string;
  tokens: number;
  breakpoint?: '5m' | '1h';
}

function segmentsOf(request: z.infer<typeof CountTokensRequest>): Segment[] {
  const segments: Segment[] = [];
  const push = (key: unknown, tokens: number, cacheControl: { ttl?: '5m' | '1h' } | null | undefined) =>
    segments.push({ key: JSON.stringify(key), tokens, ...(cacheControl ? { breakpoint: cacheControl.ttl ?? '5m' } : {}) });
  for (const tool of request.tools ?? []) push(['tool', withoutCacheControl(tool)], countTokens(JSON.stringify(withoutCacheControl(tool))), tool.cache_control);
  const system = typeof request.system === 'string' ? [{ type: 'text' as const, text: request.system }] : (request.system ?? []);
  for (const block of system) push(['system', withoutCacheControl(block)], countTokens(block.text), block.cache_control);
  for (const message of request.messages) {
    const blocks: Block[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    for (const block of blocks) {
      const tokens = block.type === 'image' ? IMAGE_TOKENS : countTokens(blockText(block) || JSON.stringify(withoutCacheControl(block)));
      push([message.role, withoutCacheControl(block)], tokens, block.cache_control);
    }
  }
  return segments;
}

function promptText(request: MessagesRequest): string {
  const system = typeof request.system === 'string' ? request.system : (request.system ?? []).map((block) => block.text).join('\n');
  const turns = request.messages.map((message) => (typeof message.content === 'string' ? message.content : message.content.map(blockText).join('\n')));
  return [system, ...turns].filter(Boolean).join('\n');
}

interface CacheUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

/**
 * The prompt cache: prefix hash → expiry. The longest cached breakpoint prefix is read (and its
 * TTL refreshed, as Anthropic does on a hit); the tokens up to the last breakpoint beyond it are written.
 */
class PromptCache {
  private entries = new Map<string, number>();

  usage(model: string, segments: Segment[], now = Date.now()): CacheUsage {
    const total = segments.reduce((sum, segment) => sum + segment.tokens, 0);
    const breakpoints: { hash: string; tokens: number; ttl: '5m' | '1h' }[] = [];
    let hash = sha256(model);
    let tokens = 0;
    for (const segment of segments) {
      hash = sha256(`${hash}\n${segment.key}`);
      tokens += segment.tokens;
      if (segment.breakpoint) breakpoints.push({ hash, tokens, ttl: segment.breakpoint });
    }
    let read = 0;
    for (const breakpoint of breakpoints) {
      if ((this.entries.get(breakpoint.hash) ?? 0) > now) read = breakpoint.tokens;
    }
    const creation = { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 };
    let covered = read;
    for (const breakpoint of breakpoints) {
      this.entries.set(breakpoint.hash, now + TTL_MS[breakpoint.ttl]);
      if (breakpoint.tokens > covered) {
        creation[breakpoint.ttl === '1h' ? 'ephemeral_1h_input_tokens' : 'ephemeral_5m_input_tokens'] += breakpoint.tokens - covered;
        covered = breakpoint.tokens;
      }
    }
    if (this.entries.size > MAX_CACHE_ENTRIES) this.forgetExpired(now);
    const written = covered - read;
    return { input_tokens: total - covered, cache_creation_input_tokens: written, cache_read_input_tokens: read, cache_creation: creation };
  }

  private forgetExpired(now: number): void {
    for (const [hash, expiresAt] of this.entries) if (expiresAt <= now) this.entries.delete(hash);
  }
}

type ReplyBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown };

interface Reply {
  content: ReplyBlock[];
  stopReason: 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';
  stopSequence: string | null;
  outputTokens: number;
}

function lastMessageHasToolResult(request: MessagesRequest): boolean {
  const last = request.messages.at(-1)!;
  return typeof last.content !== 'string' && last.content.some((block) => block.type === 'tool_result');
}

/** Anthropic's tool_choice: `any` must call a tool, `tool` must call the named one, `none` calls none. */
function toolChoiceOf(choice: MessagesRequest['tool_choice']): ToolChoice {
  const parallel = choice?.disable_parallel_tool_use !== true;
  switch (choice?.type) {
    case 'any':
      return { mode: 'required', parallel };
    case 'tool':
      return { mode: 'required', allowed: [choice.name!], parallel };
    case 'none':
      return { mode: 'none', parallel };
    default:
      return { mode: 'auto', parallel };
  }
}

/** The answer: tool calls when the tool choice or the prompt's marker asks for them (and no tool result came back yet), else text. */
function replyTo(request: MessagesRequest, prompt: string): Reply {
  const calls = plannedToolCalls({
    prompt,
    tools: (request.tools ?? []).map((tool) => ({ name: tool.name, schema: tool.input_schema })),
    choice: toolChoiceOf(request.tool_choice),
    toolResultIsLast: lastMessageHasToolResult(request),
    seed: `${request.model}\n${prompt}`,
  });
  if (calls.length > 0) {
    const content: ReplyBlock[] = calls.map((call) => ({ type: 'tool_use', id: `toolu_${randomBytes(12).toString('hex')}`, name: call.name, input: call.arguments }));
    return { content, stopReason: 'tool_use', stopSequence: null, outputTokens: countTokens(JSON.stringify(calls.map((call) => call.arguments))) };
  }
  const { text, finishReason } = deterministicReply(request.model, prompt, request.max_tokens);
  const stop = (request.stop_sequences ?? [])
    .map((sequence) => ({ sequence, at: sequence ? text.indexOf(sequence) : -1 }))
    .filter((match) => match.at >= 0)
    .sort((a, b) => a.at - b.at)[0];
  if (stop) {
    const cut = text.slice(0, stop.at);
    return { content: [{ type: 'text', text: cut }], stopReason: 'stop_sequence', stopSequence: stop.sequence, outputTokens: replyTokens(cut.trimEnd()) };
  }
  return { content: [{ type: 'text', text }], stopReason: finishReason === 'length' ? 'max_tokens' : 'end_turn', stopSequence: null, outputTokens: replyTokens(text) };
}

function streamFrames(message: { id: string; model: string }, reply: Reply, usage: CacheUsage): StreamFrame[] {
  const frames: StreamFrame[] = [];
  const event = (type: string, data: Record<string, unknown>, delta = false) => frames.push({ text: namedEvent(type, { type, ...data }), delta });
  event('message_start', {
    message: { id: message.id, type: 'message', role: 'assistant', model: message.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1, service_tier: 'standard' } },
  });
  reply.content.forEach((block, index) => {
    if (block.type === 'text') {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      if (index === 0) event('ping', {});
      for (const piece of block.text ? streamPieces(block.text) : []) event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }, true);
    } else {
      event('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      if (index === 0) event('ping', {});
      event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } }, true);
    }
    event('content_block_stop', { index });
  });
  event('message_delta', { delta: { stop_reason: reply.stopReason, stop_sequence: reply.stopSequence }, usage: { ...usage, output_tokens: reply.outputTokens } });
  event('message_stop', {});
  return frames;
}

function authenticate(options: EmulatorOptions) {
  return (req: Request, res: Response, next: NextFunction) => {
    // The API takes the key as `x-api-key`; the official SDK (1.x) sends it as a Bearer token.
    const key = req.header('x-api-key') ?? /^bearer\s+(.+)$/i.exec(req.header('authorization') ?? '')?.[1];
    if (!key) return sendError(res, 401, 'x-api-key header is required');
    if (key !== options.credentials.apiKeys[PROVIDER]) return sendError(res, 401, 'invalid x-api-key');
    if (!req.header('anthropic-version')) return sendError(res, 400, 'anthropic-version: header is required');
    next();
  };
}

/** Parses and checks a request against the catalog; answers the error itself when it fails. */
function validRequest<T extends { model: string }>(schema: z.ZodType<T>, req: Request, res: Response): T | undefined {
  const parsed = parseBody(schema, req.body);
  if (!parsed.ok) return void sendError(res, 400, parsed.message);
  if (!MODELS.has(parsed.value.model)) return void sendError(res, 404, `model: ${parsed.value.model}`);
  return parsed.value;
}

export const anthropicStyle: EmulatorStyle = {
  mount(app, { faults, options }: { faults: FaultRegistry; options: EmulatorOptions }) {
    const cache = new PromptCache();
    const router = express.Router();
    router.use(express.json({ limit: '32mb' }));
    router.use(authenticate(options));

    router.post('/v1/messages', async (req, res) => {
      const fault = await applyFault(req, res, { faults, options, provider: PROVIDER, model: modelOf(req.body), errorBody: (status) => errorBody(status) });
      if (!fault.proceed) return;
      const request = validRequest(MessagesRequest, req, res);
      if (!request) return;
      const limit = MODELS.get(request.model)!.maxOutputTokens;
      if (limit !== undefined && request.max_tokens > limit) {
        return sendError(res, 400, `max_tokens: ${request.max_tokens} > ${limit}, which is the maximum allowed number of output tokens for ${request.model}`);
      }
      const segments = segmentsOf(request);
      const breakpoints = segments.filter((segment) => segment.breakpoint).length;
      if (breakpoints > MAX_CACHE_BREAKPOINTS) return sendError(res, 400, `A maximum of ${MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints}.`);

      const usage = cache.usage(request.model, segments);
      const reply = replyTo(request, promptText(request));
      const id = `msg_${randomBytes(12).toString('hex')}`;
      res.setHeader('request-id', `req_${randomBytes(12).toString('hex')}`);
      if (request.stream) {
        await writeFrames(req, res, streamFrames({ id, model: request.model }, reply, usage), { emulator: options, disconnectAfter: fault.disconnectAfter });
        return;
      }
      res.json({
        id,
        type: 'message',
        role: 'assistant',
        model: request.model,
        content: reply.content,
        stop_reason: reply.stopReason,
        stop_sequence: reply.stopSequence,
        usage: { ...usage, output_tokens: reply.outputTokens, service_tier: 'standard' },
      });
    });

    router.post('/v1/messages/count_tokens', async (req, res) => {
      const fault = await applyFault(req, res, { faults, options, provider: PROVIDER, model: modelOf(req.body), errorBody: (status) => errorBody(status) });
      if (!fault.proceed) return;
      const request = validRequest(CountTokensRequest, req, res);
      if (!request) return;
      res.json({ input_tokens: segmentsOf(request).reduce((sum, segment) => sum + segment.tokens, 0) });
    });

    router.use((_req, res) => sendError(res, 404, 'Not found'));
    router.use((error: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
      if (error.type === 'entity.too.large') return sendError(res, 413);
      if (error.status === 400 || error.type === 'entity.parse.failed') return sendError(res, 400, 'There was an error parsing the body of your request.');
      sendError(res, 500);
    });

    app.use(`/${PROVIDER}`, router);
    return [PROVIDER];
  },
};
