import express, { type Request, type Response } from 'express';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { encodeBedrockEvent } from './event-stream.js';
import { verifySigV4 } from './sigv4.js';
import { anthropicMessage, anthropicStreamEvents, anthropicToolOffer, complete, converseToolOffer, parseAnthropicBody, promptOf, randomId, writeChunks, type Completion } from './wire-shapes.js';

/**
 * Amazon Bedrock runtime (real base https://bedrock-runtime.<region>.amazonaws.com), mounted at
 * /bedrock. Every request must carry a valid AWS Signature V4 for service `bedrock` in the
 * credentials' region; the signed path includes the /bedrock prefix (see sigv4.ts).
 *
 *   POST /model/{modelId}/invoke                       native body of the model's family
 *   POST /model/{modelId}/invoke-with-response-stream  the same, as an event stream of `chunk` events
 *   POST /model/{modelId}/converse                     the Converse API
 *   POST /model/{modelId}/converse-stream              the Converse API as an event stream
 *
 * Models: the anthropic catalog entries' cloud1 ids (also with a cross-region inference profile
 * prefix such as `us.`) and the catalog's bedrock models (amazon.nova-pro-v1:0).
 *
 * The emulator speaks HTTP/1.1: @aws-sdk/client-bedrock-runtime defaults to an HTTP/2 handler, so a
 * client pointed here passes `requestHandler: new NodeHttpHandler()` (@smithy/node-http-handler).
 */
type Family = 'anthropic' | 'nova';
const BEDROCK_MODELS = new Map<string, { family: Family; responseModel: string }>([
  ...CATALOG.flatMap((m) => (m.cloudIds ? [[m.cloudIds.cloud1, { family: 'anthropic' as const, responseModel: m.model }] as const] : [])),
  ...CATALOG.filter((m) => m.provider === 'bedrock' && m.kind === 'chat').map(
    (m) => [m.model, { family: m.model.startsWith('anthropic.') ? ('anthropic' as const) : ('nova' as const), responseModel: m.model }] as const,
  ),
]);

function resolveModel(modelId: string) {
  return BEDROCK_MODELS.get(modelId.replace(/^(us|eu|apac|global)\./, ''));
}

const OPERATIONS = new Set(['invoke', 'invoke-with-response-stream', 'converse', 'converse-stream']);

const ERROR_TYPES: Record<number, string> = {
  400: 'ValidationException',
  403: 'AccessDeniedException',
  404: 'ResourceNotFoundException',
  408: 'ModelTimeoutException',
  424: 'ModelErrorException',
  429: 'ThrottlingException',
  500: 'InternalServerException',
  503: 'ServiceUnavailableException',
};

/** AWS's JSON error: `{message}` with the exception name in x-amzn-ErrorType, which the SDK maps to a class. */
function sendAwsError(res: Response, status: number, errorType: string, message: string): void {
  res.status(status).setHeader('x-amzn-ErrorType', errorType).setHeader('x-amzn-RequestId', randomId('', 16)).json({ message });
}

type ParsedRequest = { prompt: string; maxTokens: number | undefined } | { error: string };

/** Converse and Nova share a body: messages of `content: [{text}]`, `system: [{text}]`, and inference settings. */
function parseMessagesV1(body: unknown, maxTokensOf: (config: Record<string, unknown>) => unknown): ParsedRequest {
  const b = (body ?? {}) as { messages?: unknown; system?: unknown; inferenceConfig?: Record<string, unknown> };
  if (!Array.isArray(b.messages) || b.messages.length === 0) return { error: 'messages: at least one message is required' };
  if (b.messages.some((message) => !Array.isArray((message as { content?: unknown })?.content))) return { error: 'messages.content: expected an array of content blocks' };
  const maxTokens = maxTokensOf(b.inferenceConfig ?? {});
  if (maxTokens !== undefined && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) return { error: 'inferenceConfig.maxTokens: must be a positive integer' };
  return { prompt: promptOf(b.messages as { content?: unknown }[], b.system), maxTokens: maxTokens as number | undefined };
}

const converseStopReason = (completion: Completion) => (completion.toolCalls ? 'tool_use' : completion.finishReason === 'length' ? 'max_tokens' : 'end_turn');

/** Converse's content blocks: toolUse blocks for tool calls, else one text block. */
const converseContent = (completion: Completion) =>
  completion.toolCalls ? completion.toolCalls.map((call) => ({ toolUse: { toolUseId: call.id.replace(/^call_/, 'tooluse_'), name: call.name, input: call.arguments } })) : [{ text: completion.text }];

function invocationMetrics(completion: Completion, startedAt: number) {
  const latency = Date.now() - startedAt;
  return { inputTokenCount: completion.inputTokens, outputTokenCount: completion.outputTokens, invocationLatency: latency, firstByteLatency: latency };
}

/** The native (InvokeModel) response body of a model family. */
function invokeBody(family: Family, responseModel: string, completion: Completion) {
  if (family === 'anthropic') return anthropicMessage(randomId('msg_bdrk_'), responseModel, completion);
  return {
    output: { message: { role: 'assistant', content: converseContent(completion) } },
    stopReason: converseStopReason(completion),
    usage: { inputTokens: completion.inputTokens, outputTokens: completion.outputTokens, totalTokens: completion.inputTokens + completion.outputTokens },
  };
}

/** The native streaming events of a model family; the last one carries Bedrock's invocation metrics. */
function invokeStreamEvents(family: Family, responseModel: string, completion: Completion, startedAt: number): Record<string, unknown>[] {
  const events: Record<string, unknown>[] =
    family === 'anthropic'
      ? anthropicStreamEvents(randomId('msg_bdrk_'), responseModel, completion)
      : converseStreamEvents(completion, startedAt).map(([eventType, body]) => ({ [eventType]: body }));
  const last = events[events.length - 1]!;
  events[events.length - 1] = { ...last, 'amazon-bedrock-invocationMetrics': invocationMetrics(completion, startedAt) };
  return events;
}

/**
 * ConverseStream's events as [event type, body]: messageStart, then per text block its deltas and
 * contentBlockStop (per tool call a contentBlockStart with its id and name, one toolUse delta with its
 * input as JSON text, and contentBlockStop), messageStop, metadata.
 */
function converseStreamEvents(completion: Completion, startedAt: number): [string, unknown][] {
  const blocks: [string, unknown][] = completion.toolCalls
    ? converseContent(completion).flatMap((block, contentBlockIndex): [string, unknown][] => {
        const { toolUseId, name, input } = (block as { toolUse: { toolUseId: string; name: string; input: unknown } }).toolUse;
        return [
          ['contentBlockStart', { contentBlockIndex, start: { toolUse: { toolUseId, name } } }],
          ['contentBlockDelta', { contentBlockIndex, delta: { toolUse: { input: JSON.stringify(input) } } }],
          ['contentBlockStop', { contentBlockIndex }],
        ];
      })
    : [...streamPieces(completion.text).map((text): [string, unknown] => ['contentBlockDelta', { contentBlockIndex: 0, delta: { text } }]), ['contentBlockStop', { contentBlockIndex: 0 }]];
  return [
    ['messageStart', { role: 'assistant' }],
    ...blocks,
    ['messageStop', { stopReason: converseStopReason(completion) }],
    [
      'metadata',
      {
        usage: { inputTokens: completion.inputTokens, outputTokens: completion.outputTokens, totalTokens: completion.inputTokens + completion.outputTokens },
        metrics: { latencyMs: Date.now() - startedAt },
      },
    ],
  ];
}

function startEventStreamResponse(res: Response): void {
  res.status(200);
  res.setHeader('content-type', 'application/vnd.amazon.eventstream');
  res.setHeader('x-amzn-bedrock-content-type', 'application/json');
  res.setHeader('x-amzn-RequestId', randomId('', 16));
  res.flushHeaders();
}

export function bedrockStyle(): EmulatorStyle {
  return {
    mount(app, { faults, options }) {
      const router = express.Router();
      router.use(express.raw({ type: () => true, limit: '20mb' }));
      router.use((req, res, next) => {
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const result = verifySigV4(req, body, options.credentials.aws, 'bedrock');
        if (!result.ok) return sendAwsError(res, 403, result.errorType, result.message);
        next();
      });
      router.post('/model/:modelId/:operation', (req, res) => handleModelCall(req, res, faults, options));
      router.use((_req, res) => sendAwsError(res, 404, 'UnknownOperationException', 'Unknown operation'));
      app.use('/bedrock', router);
      return ['bedrock'];
    },
  };
}

async function handleModelCall(req: Request, res: Response, faults: FaultRegistry, options: EmulatorOptions): Promise<void> {
  const { modelId, operation } = req.params as { modelId: string; operation: string };
  if (!OPERATIONS.has(operation)) return sendAwsError(res, 404, 'UnknownOperationException', 'Unknown operation');
  const startedAt = Date.now();
  const fault = await applyFault(req, res, {
    faults,
    options,
    provider: 'bedrock',
    model: modelId,
    errorBody: (status) => {
      res.setHeader('x-amzn-ErrorType', ERROR_TYPES[status] ?? (status >= 500 ? 'InternalServerException' : 'ValidationException'));
      return { message: status === 429 ? 'Too many requests, please wait before trying again.' : `The emulator was asked to fail this request with status ${status}.` };
    },
  });
  if (!fault.proceed) return;

  const model = resolveModel(modelId);
  if (!model) return sendAwsError(res, 400, 'ValidationException', 'The provided model identifier is invalid.');
  let body: unknown;
  try {
    body = JSON.parse((req.body as Buffer).toString('utf8'));
  } catch {
    return sendAwsError(res, 400, 'ValidationException', 'Malformed input request, please reformat your input and try again.');
  }
  const converse = operation.startsWith('converse');
  const parsed: ParsedRequest = converse
    ? parseMessagesV1(body, (config) => config.maxTokens)
    : model.family === 'anthropic'
      ? parseAnthropicBody(body, 'bedrock-2023-05-31')
      : parseMessagesV1(body, (config) => config.maxTokens ?? config.max_new_tokens);
  if ('error' in parsed) return sendAwsError(res, 400, 'ValidationException', `Malformed input request: ${parsed.error}, please reformat your input and try again.`);
  const offer = !converse && model.family === 'anthropic' ? anthropicToolOffer(body) : converseToolOffer(body);
  const completion = complete(modelId, parsed.prompt, parsed.maxTokens, offer);

  if (operation === 'invoke') {
    res.setHeader('x-amzn-RequestId', randomId('', 16));
    res.setHeader('x-amzn-bedrock-input-token-count', String(completion.inputTokens));
    res.setHeader('x-amzn-bedrock-output-token-count', String(completion.outputTokens));
    res.setHeader('x-amzn-bedrock-invocation-latency', String(Date.now() - startedAt));
    res.json(invokeBody(model.family, model.responseModel, completion));
    return;
  }
  if (operation === 'converse') {
    res.setHeader('x-amzn-RequestId', randomId('', 16));
    res.json({
      output: { message: { role: 'assistant', content: converseContent(completion) } },
      stopReason: converseStopReason(completion),
      usage: { inputTokens: completion.inputTokens, outputTokens: completion.outputTokens, totalTokens: completion.inputTokens + completion.outputTokens },
      metrics: { latencyMs: Date.now() - startedAt },
    });
    return;
  }
  const frames =
    operation === 'converse-stream'
      ? converseStreamEvents(completion, startedAt).map(([eventType, eventBody]) => encodeBedrockEvent(eventType, eventBody))
      : // InvokeModelWithResponseStream wraps each native event, base64-encoded, in a `chunk` event.
        invokeStreamEvents(model.family, model.responseModel, completion, startedAt).map((event) =>
          encodeBedrockEvent('chunk', { bytes: Buffer.from(JSON.stringify(event), 'utf8').toString('base64') }),
        );
  startEventStreamResponse(res);
  await writeChunks(req, res, frames, options, fault.disconnectAfter);
}
