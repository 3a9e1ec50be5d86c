import { readEventStream, type EventStreamMessage } from './aws-event-stream.js';
import { signRequest } from './aws-sigv4.js';
import { networkFailure, readJson, upstreamFetch, type UpstreamResponse } from './http.js';
import type { BedrockSettings } from './settings.js';
import {
  STREAM_OPENED,
  UpstreamError,
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  type ChatStreamEvent,
  type ContentPart,
  type FinishReason,
  type ProviderAdapter,
  type ToolCall,
  type Usage,
} from './types.js';

/**
 * Amazon Bedrock through the Converse API, for both the anthropic models on the cloud1 route
 * (`@us-cloud1` / `@eu-cloud1`; the router passes the model's cloud1 id as upstreamModel) and the
 * catalog's own bedrock models (amazon.nova-pro-v1:0). One API for every model family keeps the
 * mapping in one place; streams use `converse-stream`, whose answer is AWS event-stream framing.
 *
 * Regions: with the default host `https://bedrock-runtime.<region>.amazonaws.com`, an `@eu-*`
 * reference swaps the host's region for an EU one (the configured region when it already is one,
 * else eu-central-1) and `@us-*` likewise for a US one (else us-east-1), and the request is signed
 * for that region. Anthropic models are then called through the geography's cross-region inference
 * profile (`eu.` / `us.` before the model id), which newer Claude models require on demand and
 * which keeps the call inside the geography. A BEDROCK_BASE_URL override (the emulator) is used as
 * is and signed for the configured region.
 */
const PROVIDER = 'bedrock';
const SERVICE = 'bedrock';
const DEFAULT_HOST = /^https:\/\/bedrock-runtime\.([a-z0-9-]+)\.amazonaws\.com$/;
const GEOGRAPHY_DEFAULT_REGION = { eu: 'eu-central-1', us: 'us-east-1' } as const;

interface Target {
  baseUrl: string;
  region: string;
  modelId: string;
}

function targetOf(settings: BedrockSettings, request: ChatRequest): Target {
  const geography = request.region?.startsWith('eu') ? 'eu' : request.region?.startsWith('us') ? 'us' : undefined;
  if (!geography) return { baseUrl: settings.baseUrl, region: settings.region, modelId: request.upstreamModel };
  const profiled = request.model.provider === 'anthropic' && !/^(us|eu|apac|global)\./.test(request.upstreamModel);
  const modelId = profiled ? `${geography}.${request.upstreamModel}` : request.upstreamModel;
  if (!DEFAULT_HOST.test(settings.baseUrl)) return { baseUrl: settings.baseUrl, region: settings.region, modelId };
  const region = settings.region.startsWith(`${geography}-`) ? settings.region : GEOGRAPHY_DEFAULT_REGION[geography];
  return { baseUrl: `https://bedrock-runtime.${region}.amazonaws.com`, region, modelId };
}

// ---- Converse request shapes -------------------------------------------------------------

type ConverseBlock =
  | { text: string }
  | { image: { format: string; source: { bytes: string } } }
  | { document: { format: string; name: string; source: { bytes: string } } }
  | { toolUse: { toolUseId: string; name: string; input: unknown } }
  | { toolResult: { toolUseId: string; content: { text: string }[] } }
  | { cachePoint: { type: 'default' } };

type SystemBlock = { text: string } | { cachePoint: { type: 'default' } };

interface ConverseMessage {
  role: 'user' | 'assistant';
  content: ConverseBlock[];
}

const unsupported = (what: string) => new UpstreamError(PROVIDER, 400, `${what} is not supported on Bedrock`, false);

function parseDataUrl(url: string): { mediaType: string; base64: string } | undefined {
  const match = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
  return match ? { mediaType: match[1]!, base64: match[2]! } : undefined;
}

function textOf(content: ChatMessage['content']): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

function converseBlock(part: ContentPart): ConverseBlock {
  switch (part.type) {
    case 'text':
      return { text: part.text };
    case 'image_url': {
      // Converse takes image bytes only (or S3), never a URL to fetch.
      const data = parseDataUrl(part.image_url.url);
      if (!data?.mediaType.startsWith('image/')) throw unsupported('An image given by URL rather than as a data: URL');
      return { image: { format: data.mediaType.slice('image/'.length).replace('jpg', 'jpeg'), source: { bytes: data.base64 } } };
    }
    case 'file': {
      const data = part.file.file_data ? parseDataUrl(part.file.file_data) : undefined;
      if (data?.mediaType !== 'application/pdf') throw unsupported('A file other than an inline PDF');
      // Bedrock document names allow letters, digits, spaces, hyphens, parentheses and brackets.
      const name = (part.file.filename ?? 'document').replace(/\.[^.]*$/, '').replace(/[^A-Za-z0-9 ()[\]-]/g, '-') || 'document';
      return { document: { format: 'pdf', name, source: { bytes: data.base64 } } };
    }
    default:
      throw unsupported(`A content part of type ${part.type}`);
  }
}

const CACHE_POINT = { cachePoint: { type: 'default' } } as const;

/**
 * Prompt caching on Bedrock is a `cachePoint` block after the cached prefix: one after each message
 * (or system text) that carries cache_control, and with prompt_cache 'auto' one after the whole
 * prompt. Only models whose catalog entry has prompt_cache get them; others would refuse the block.
 */
function toConverseMessages(request: ChatRequest): { system: SystemBlock[]; messages: ConverseMessage[] } {
  const caching = request.model.capabilities.prompt_cache === true;
  const system: SystemBlock[] = [];
  const out: ConverseMessage[] = [];
  // Converse wants strictly alternating roles, so consecutive same-role turns (several tool results) merge.
  const push = (role: ConverseMessage['role'], content: ConverseBlock[], message: ChatMessage) => {
    if (content.length === 0) return;
    if (caching && message.cache_control) content.push(CACHE_POINT);
    const last = out.at(-1);
    if (last?.role === role) last.content.push(...content);
    else out.push({ role, content });
  };
  for (const message of request.messages) {
    if (message.role === 'system' || message.role === 'developer') {
      const text = textOf(message.content);
      if (text) system.push({ text }, ...(caching && message.cache_control ? [CACHE_POINT] : []));
    } else if (message.role === 'tool') {
      push('user', [{ toolResult: { toolUseId: message.tool_call_id ?? '', content: [{ text: textOf(message.content) }] } }], message);
    } else if (message.role === 'assistant') {
      const text = textOf(message.content);
      const calls = (message.tool_calls ?? []).map((call) => ({ toolUse: { toolUseId: call.id, name: call.function.name, input: parseArguments(call.function.arguments) } }));
      push('assistant', [...(text ? [{ text }] : []), ...calls], message);
    } else {
      const content = typeof message.content === 'string' ? [{ text: message.content }] : (message.content ?? []).map(converseBlock);
      push('user', content, message);
    }
  }
  const lastContent = out.at(-1)?.content;
  if (caching && request.promptCache === 'auto' && lastContent && !('cachePoint' in lastContent[lastContent.length - 1]!)) lastContent.push(CACHE_POINT);
  return { system, messages: out };
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return {};
  }
}

function toolChoiceOf(choice: unknown): Record<string, unknown> | undefined {
  if (choice === 'required') return { any: {} };
  if (choice === 'auto') return { auto: {} };
  const name = (choice as { function?: { name?: string } } | undefined)?.function?.name;
  return name ? { tool: { name } } : undefined;
}

function converseBody(request: ChatRequest): Record<string, unknown> {
  const { system, messages } = toConverseMessages(request);
  const inferenceConfig = {
    ...(request.maxTokens !== undefined && { maxTokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { topP: request.topP }),
    ...(request.stop?.length && { stopSequences: request.stop }),
  };
  const tools = request.toolChoice === 'none' ? [] : (request.tools ?? []);
  const toolChoice = toolChoiceOf(request.toolChoice);
  return {
    messages,
    ...(system.length > 0 && { system }),
    ...(Object.keys(inferenceConfig).length > 0 && { inferenceConfig }),
    ...(tools.length > 0 && {
      toolConfig: {
        tools: tools.map((tool) => ({
          toolSpec: { name: tool.function.name, ...(tool.function.description && { description: tool.function.description }), inputSchema: { json: tool.function.parameters ?? { type: 'object', properties: {} } } },
        })),
        ...(toolChoice && { toolChoice }),
      },
    }),
  };
}

// ---- Converse responses -----------------------------------------------------------------

interface ConverseUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
}

interface ConverseResponse {
  output?: { message?: { content?: Array<{ text?: string; toolUse?: { toolUseId: string; name: string; input: unknown } }> } };
  stopReason?: string;
  usage?: ConverseUsage;
}

function finishReasonOf(stopReason: string | undefined): FinishReason {
  switch (stopReason) {
    case 'max_tokens':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'content_filtered':
    case 'guardrail_intervened':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** inputTokens is the whole prompt: Bedrock counts cached reads and writes apart from its inputTokens. */
function usageOf(usage: ConverseUsage | undefined): Usage {
  return {
    inputTokens: (usage?.inputTokens ?? 0) + (usage?.cacheReadInputTokens ?? 0) + (usage?.cacheWriteInputTokens ?? 0),
    outputTokens: usage?.outputTokens ?? 0,
    ...(usage?.cacheReadInputTokens !== undefined && { cacheReadTokens: usage.cacheReadInputTokens }),
    ...(usage?.cacheWriteInputTokens !== undefined && { cacheWriteTokens: usage.cacheWriteInputTokens }),
  };
}

function chatResultOf(response: ConverseResponse): ChatResult {
  const blocks = response.output?.message?.content ?? [];
  const texts = blocks.filter((block) => typeof block.text === 'string').map((block) => block.text!);
  const toolCalls: ToolCall[] = blocks
    .filter((block) => block.toolUse)
    .map(({ toolUse }) => ({ id: toolUse!.toolUseId, type: 'function', function: { name: toolUse!.name, arguments: JSON.stringify(toolUse!.input ?? {}) } }));
  return {
    content: texts.length > 0 ? texts.join('') : null,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: finishReasonOf(response.stopReason),
    usage: usageOf(response.usage),
  };
}

/** Statuses of the exceptions Bedrock sends inside a stream, as its HTTP errors would carry them. */
const STREAM_EXCEPTION_STATUS: Record<string, number> = {
  throttlingException: 429,
  internalServerException: 500,
  serviceUnavailableException: 503,
  modelStreamErrorException: 424,
  modelTimeoutException: 408,
  validationException: 400,
};

function streamException(message: EventStreamMessage): UpstreamError {
  const type = String(message.headers[':exception-type'] ?? message.headers[':error-code'] ?? 'unknown');
  let text = String(message.headers[':error-message'] ?? type);
  try {
    text = (JSON.parse(new TextDecoder().decode(message.payload)) as { message?: string }).message ?? text;
  } catch {
    // the header text stays
  }
  return UpstreamError.fromStatus(PROVIDER, STREAM_EXCEPTION_STATUS[type] ?? 500, `${type}: ${text}`);
}

// ---- the adapter ------------------------------------------------------------------------

export function createBedrockAdapter(settings: BedrockSettings): ProviderAdapter {
  async function call(request: ChatRequest, operation: 'converse' | 'converse-stream'): Promise<UpstreamResponse> {
    const target = targetOf(settings, request);
    const url = `${target.baseUrl}/model/${encodeURIComponent(target.modelId)}/${operation}`;
    const body = JSON.stringify(converseBody(request));
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: operation === 'converse' ? 'application/json' : 'application/vnd.amazon.eventstream' };
    const signed = signRequest({
      method: 'POST',
      url,
      headers,
      body,
      region: target.region,
      service: SERVICE,
      accessKeyId: settings.accessKeyId,
      secretAccessKey: settings.secretAccessKey,
      ...(settings.sessionToken && { sessionToken: settings.sessionToken }),
      now: new Date(),
    });
    return upstreamFetch(PROVIDER, url, { method: 'POST', headers: { ...headers, ...signed }, body, signal: request.signal });
  }

  return {
    provider: PROVIDER,

    async chat(request) {
      const response = await call(request, 'converse');
      return chatResultOf(await readJson<ConverseResponse>(PROVIDER, response, request.signal));
    },

    async *chatStream(request) {
      const response = await call(request, 'converse-stream');
      let finishReason: FinishReason | undefined;
      let usage: Usage | undefined;
      // Tool calls are numbered in order of appearance, whatever their content-block index.
      const toolIndexByBlock = new Map<number, number>();
      const decoder = new TextDecoder();
      let opened = false;
      try {
        for await (const message of readEventStream(response.body)) {
          const messageType = message.headers[':message-type'];
          if (messageType === 'exception' || messageType === 'error') throw streamException(message);
          if (!opened) {
            opened = true;
            yield STREAM_OPENED;
          }
          const eventType = message.headers[':event-type'];
          const event = JSON.parse(decoder.decode(message.payload)) as Record<string, unknown>;
          if (eventType === 'contentBlockStart') {
            const { contentBlockIndex, start } = event as { contentBlockIndex: number; start?: { toolUse?: { toolUseId: string; name: string } } };
            if (start?.toolUse) {
              const index = toolIndexByBlock.size;
              toolIndexByBlock.set(contentBlockIndex, index);
              yield { type: 'delta', toolCalls: [{ index, id: start.toolUse.toolUseId, name: start.toolUse.name }] } satisfies ChatStreamEvent;
            }
          } else if (eventType === 'contentBlockDelta') {
            const { contentBlockIndex, delta } = event as { contentBlockIndex: number; delta?: { text?: string; toolUse?: { input?: string } } };
            if (typeof delta?.text === 'string' && delta.text !== '') yield { type: 'delta', content: delta.text };
            const index = toolIndexByBlock.get(contentBlockIndex);
            if (delta?.toolUse?.input && index !== undefined) yield { type: 'delta', toolCalls: [{ index, arguments: delta.toolUse.input }] };
          } else if (eventType === 'messageStop') {
            finishReason = finishReasonOf((event as { stopReason?: string }).stopReason);
          } else if (eventType === 'metadata') {
            usage = usageOf((event as { usage?: ConverseUsage }).usage);
          }
        }
      } catch (error) {
        throw networkFailure(PROVIDER, error, request.signal);
      }
      if (!finishReason || !usage) throw new UpstreamError(PROVIDER, undefined, 'stream ended before messageStop and metadata', true);
      yield { type: 'finish', finishReason };
      yield { type: 'usage', usage };
    },
  };
}
