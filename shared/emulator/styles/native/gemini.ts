import { randomBytes } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, countTokens, deterministicEmbedding, deterministicReply, replyTokens, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { plannedToolCalls, type ToolChoice } from '../../tool-calls.js';
import { parseBody, valueForSchema, writeFrames, type StreamFrame } from './wire.js';

/**
 * The Gemini API (https://generativelanguage.googleapis.com) under `/gemini`:
 * `/{v1beta|v1}/models/{model}:{generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents}`.
 * The key comes in `x-goog-api-key` or `?key=`; errors use Google's `{error:{code,message,status}}`.
 */

const PROVIDER = 'gemini';
const CHAT_MODELS = new Set(CATALOG.filter((model) => model.provider === PROVIDER && model.kind === 'chat').map((model) => model.model));
const EMBEDDING_DIMENSIONS = new Map(CATALOG.filter((model) => model.provider === PROVIDER && model.kind === 'embedding').map((model) => [model.model, model.dimensions!]));
const MAX_BATCH_EMBED_REQUESTS = 100;

const STATUS_NAME: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

const DEFAULT_MESSAGE: Record<number, string> = {
  429: 'Resource has been exhausted (e.g. check quota).',
  500: 'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
  503: 'The model is overloaded. Please try again later.',
  504: 'Deadline expired before operation could complete.',
};

function errorBody(status: number, message?: string, details?: unknown[]) {
  return { error: { code: status, message: message ?? DEFAULT_MESSAGE[status] ?? 'Request failed.', status: STATUS_NAME[status] ?? 'UNKNOWN', ...(details ? { details } : {}) } };
}

function sendError(res: Response, status: number, message?: string, details?: unknown[]): void {
  res.status(status).json(errorBody(status, message, details));
}

const Part = z.looseObject({ text: z.string().optional(), functionCall: z.unknown().optional(), functionResponse: z.unknown().optional() });
const Content = z.looseObject({ role: z.string().optional(), parts: z.array(Part) });
type Content = z.infer<typeof Content>;

const GenerateContentRequest = z.looseObject({
  contents: z.array(Content).min(1, 'contents is not specified'),
  systemInstruction: Content.optional(),
  tools: z.array(z.looseObject({ functionDeclarations: z.array(z.looseObject({ name: z.string(), parameters: z.unknown().optional(), parametersJsonSchema: z.unknown().optional() })).optional() })).optional(),
  toolConfig: z
    .looseObject({
      functionCallingConfig: z
        .looseObject({ mode: z.enum(['MODE_UNSPECIFIED', 'AUTO', 'ANY', 'NONE', 'VALIDATED']).optional(), allowedFunctionNames: z.array(z.string()).optional() })
        .refine((config) => !config.allowedFunctionNames?.length || config.mode === 'ANY' || config.mode === 'VALIDATED', {
          message: 'allowed_function_names may be set only when the mode is ANY or VALIDATED.',
          path: ['allowedFunctionNames'],
        })
        .optional(),
    })
    .optional(),
  generationConfig: z
    .looseObject({
      maxOutputTokens: z.number().int().min(1).optional(),
      responseMimeType: z.string().optional(),
      responseSchema: z.unknown().optional(),
      responseJsonSchema: z.unknown().optional(),
      temperature: z.number().min(0).max(2).optional(),
    })
    .optional(),
});
type GenerateContentRequest = z.infer<typeof GenerateContentRequest>;

const EmbedContentRequest = z.looseObject({
  model: z.string().optional(),
  content: Content,
  taskType: z.string().optional(),
  title: z.string().optional(),
  outputDimensionality: z.number().int().min(1).optional(),
});
type EmbedContentRequest = z.infer<typeof EmbedContentRequest>;

const BatchEmbedContentsRequest = z.looseObject({ requests: z.array(EmbedContentRequest).min(1).max(MAX_BATCH_EMBED_REQUESTS) });

/** Google's JSON mapping also accepts the proto (snake_case) names; the request fields used here are renamed. */
function camelFields(body: unknown): unknown {
  const rename = (value: unknown, names: Record<string, string>) => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return value;
    const record = { ...(value as Record<string, unknown>) };
    for (const [snake, camel] of Object.entries(names)) {
      if (snake in record && !(camel in record)) record[camel] = record[snake];
      delete record[snake];
    }
    return record;
  };
  const top = rename(body, { system_instruction: 'systemInstruction', generation_config: 'generationConfig', tool_config: 'toolConfig', output_dimensionality: 'outputDimensionality', task_type: 'taskType' }) as Record<string, unknown> | undefined;
  if (top?.toolConfig) {
    const toolConfig = rename(top.toolConfig, { function_calling_config: 'functionCallingConfig' }) as Record<string, unknown>;
    if (toolConfig.functionCallingConfig) toolConfig.functionCallingConfig = rename(toolConfig.functionCallingConfig, { allowed_function_names: 'allowedFunctionNames' });
    top.toolConfig = toolConfig;
  }
  if (top?.generationConfig) {
    top.generationConfig = rename(top.generationConfig, { max_output_tokens: 'maxOutputTokens', response_mime_type: 'responseMimeType', response_schema: 'responseSchema', response_json_schema: 'responseJsonSchema' });
  }
  return top;
}

const partsText = (content: Content | undefined) =>
  (content?.parts ?? []).map((part) => part.text ?? (part.functionResponse ? JSON.stringify(part.functionResponse) : part.functionCall ? JSON.stringify(part.functionCall) : '')).join('\n');

interface Reply {
  parts: ({ text: string } | { functionCall: { name: string; args: unknown } })[];
  /** What a stream sends, one chunk per entry. */
  chunks: ({ text: string } | { functionCall: { name: string; args: unknown } })[];
  finishReason: 'STOP' | 'MAX_TOKENS';
  tokens: number;
}

/**
 * Gemini's functionCallingConfig: ANY must call a function (one of allowedFunctionNames when given),
 * NONE calls none, AUTO and VALIDATED (unset too) call one when the prompt's marker asks.
 */
function toolChoiceOf(config: NonNullable<GenerateContentRequest['toolConfig']>['functionCallingConfig']): ToolChoice {
  const allowed = config?.allowedFunctionNames?.length ? { allowed: config.allowedFunctionNames } : {};
  if (config?.mode === 'ANY') return { mode: 'required', ...allowed, parallel: true };
  if (config?.mode === 'NONE') return { mode: 'none', parallel: true };
  return { mode: 'auto', ...allowed, parallel: true };
}

/** Function calls when the tool config or the prompt's marker asks (and no function response came back yet), JSON in JSON mode, else text. */
function replyTo(model: string, request: GenerateContentRequest): Reply {
  const prompt = [partsText(request.systemInstruction), ...request.contents.map(partsText)].filter(Boolean).join('\n');
  const calls = plannedToolCalls({
    prompt,
    tools: (request.tools ?? []).flatMap((tool) => tool.functionDeclarations ?? []).map((declaration) => ({ name: declaration.name, schema: declaration.parametersJsonSchema ?? declaration.parameters })),
    choice: toolChoiceOf(request.toolConfig?.functionCallingConfig),
    toolResultIsLast: request.contents.at(-1)!.parts.some((part) => part.functionResponse),
    seed: `${model}\n${prompt}`,
  });
  if (calls.length > 0) {
    // Parallel calls are parts of one candidate; a stream sends one chunk per call.
    const parts = calls.map((call) => ({ functionCall: { name: call.name, args: call.arguments } }));
    return { parts, chunks: parts, finishReason: 'STOP', tokens: countTokens(JSON.stringify(parts)) };
  }
  const config = request.generationConfig;
  if (config?.responseMimeType === 'application/json') {
    const schema = config.responseSchema ?? config.responseJsonSchema;
    const text = JSON.stringify(schema ? valueForSchema(schema, `${model}\n${prompt}`) : { text: deterministicReply(model, prompt).text });
    const chunks = Array.from({ length: Math.ceil(text.length / 16) }, (_, i) => ({ text: text.slice(i * 16, i * 16 + 16) }));
    return { parts: [{ text }], chunks, finishReason: 'STOP', tokens: countTokens(text) };
  }
  const { text, finishReason } = deterministicReply(model, prompt, config?.maxOutputTokens);
  return { parts: [{ text }], chunks: streamPieces(text).map((piece) => ({ text: piece })), finishReason: finishReason === 'length' ? 'MAX_TOKENS' : 'STOP', tokens: replyTokens(text) };
}

function promptTokens(request: GenerateContentRequest): number {
  return countTokens([partsText(request.systemInstruction), ...request.contents.map(partsText)].join('\n'));
}

function streamChunks(model: string, reply: Reply, prompt: number): object[] {
  const responseId = randomBytes(12).toString('base64url');
  return reply.chunks.map((part, i) => {
    const last = i === reply.chunks.length - 1;
    return {
      candidates: [{ content: { role: 'model', parts: [part] }, ...(last ? { finishReason: reply.finishReason } : {}), index: 0 }],
      usageMetadata: last ? { promptTokenCount: prompt, candidatesTokenCount: reply.tokens, totalTokenCount: prompt + reply.tokens } : { promptTokenCount: prompt, totalTokenCount: prompt },
      modelVersion: model,
      responseId,
    };
  });
}

function authenticate(options: EmulatorOptions) {
  return (req: Request, res: Response, next: NextFunction) => {
    const key = req.header('x-goog-api-key') ?? (typeof req.query.key === 'string' ? req.query.key : undefined);
    if (!key) {
      return sendError(res, 403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
    }
    if (key !== options.credentials.apiKeys[PROVIDER]) {
      return sendError(res, 400, 'API key not valid. Please pass a valid API key.', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } },
      ]);
    }
    next();
  };
}

const notFound = (model: string, version: string, method: string) =>
  `models/${model} is not found for API version ${version}, or is not supported for ${method}. Call ListModels to see the list of available models and their supported methods.`;

/** Embedding requests name their model as `models/<id>`; it must be the one in the path. */
function embedding(model: string, request: EmbedContentRequest): { values: number[] } | string {
  if (request.model !== undefined && request.model !== `models/${model}`) {
    return `Model names should match. Request model: models/${model}, embedding request model: ${request.model}`;
  }
  const dimensions = EMBEDDING_DIMENSIONS.get(model)!;
  const requested = request.outputDimensionality ?? dimensions;
  if (requested > dimensions) return `* EmbedContentRequest.output_dimensionality: must be at most ${dimensions}`;
  return { values: deterministicEmbedding(model, partsText(request.content), requested) };
}

export const geminiStyle: EmulatorStyle = {
  mount(app, { faults, options }: { faults: FaultRegistry; options: EmulatorOptions }) {
    const router = express.Router();
    router.use(express.json({ limit: '32mb' }));
    router.use(authenticate(options));

    router.post('/:version/models/:target', async (req, res, next) => {
      const version = req.params.version as string;
      const [model = '', method = ''] = (req.params.target as string).split(':');
      if (version !== 'v1beta' && version !== 'v1') return next();
      const fault = await applyFault(req, res, { faults, options, provider: PROVIDER, model, errorBody: (status) => errorBody(status) });
      if (!fault.proceed) return;
      const body = camelFields(req.body);

      if (method === 'generateContent' || method === 'streamGenerateContent' || method === 'countTokens') {
        if (!CHAT_MODELS.has(model)) return sendError(res, 404, notFound(model, version, method));
        const parsed = parseBody(GenerateContentRequest, body);
        if (!parsed.ok) return sendError(res, 400, `* GenerateContentRequest.${parsed.message}`);
        const request = parsed.value;
        const prompt = promptTokens(request);
        if (method === 'countTokens') return res.json({ totalTokens: prompt });
        const reply = replyTo(model, request);
        if (method === 'generateContent') {
          return res.json({
            candidates: [{ content: { role: 'model', parts: reply.parts }, finishReason: reply.finishReason, index: 0 }],
            usageMetadata: { promptTokenCount: prompt, candidatesTokenCount: reply.tokens, totalTokenCount: prompt + reply.tokens },
            modelVersion: model,
            responseId: randomBytes(12).toString('base64url'),
          });
        }
        const chunks = streamChunks(model, reply, prompt);
        // With ?alt=sse each chunk is one `data:` event; without it the API streams one JSON array.
        const frames: StreamFrame[] =
          req.query.alt === 'sse'
            ? chunks.map((chunk) => ({ text: `data: ${JSON.stringify(chunk)}\r\n\r\n`, delta: true }))
            : [...chunks.map((chunk, i) => ({ text: `${i === 0 ? '[' : ',\r\n'}${JSON.stringify(chunk)}`, delta: true })), { text: ']' }];
        return writeFrames(req, res, frames, { emulator: options, disconnectAfter: fault.disconnectAfter, ...(req.query.alt === 'sse' ? {} : { contentType: 'application/json; charset=UTF-8' }) });
      }

      if (method === 'embedContent' || method === 'batchEmbedContents') {
        if (!EMBEDDING_DIMENSIONS.has(model)) return sendError(res, 404, notFound(model, version, method));
        if (method === 'embedContent') {
          const parsed = parseBody(EmbedContentRequest, body);
          if (!parsed.ok) return sendError(res, 400, `* EmbedContentRequest.${parsed.message}`);
          const result = embedding(model, { ...parsed.value, model: undefined });
          return typeof result === 'string' ? sendError(res, 400, result) : res.json({ embedding: result });
        }
        const parsed = parseBody(BatchEmbedContentsRequest, body);
        if (!parsed.ok) return sendError(res, 400, `* BatchEmbedContentsRequest.${parsed.message}`);
        const results = parsed.value.requests.map((request) => embedding(model, camelFields(request) as EmbedContentRequest));
        const failure = results.find((result) => typeof result === 'string');
        return failure ? sendError(res, 400, failure) : res.json({ embeddings: results });
      }
      sendError(res, 404, notFound(model, version, method));
    });

    router.use((req, res) => sendError(res, 404, `Method not found: ${req.method} ${req.path}`));
    router.use((error: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
      if (error.type === 'entity.too.large') return sendError(res, 400, 'Request payload size exceeds the limit.');
      if (error.status === 400 || error.type === 'entity.parse.failed') return sendError(res, 400, 'Invalid JSON payload received.');
      sendError(res, 500);
    });

    app.use(`/${PROVIDER}`, router);
    return [PROVIDER];
  },
};
