import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { applyFault, type EmulatorOptions, type FaultRegistry } from '../core.js';
import type { EmulatorStyle } from '../server.js';
import { CATALOG } from '../../models/catalog.js';
import { chatCompletions } from './openai-compatible/chat.js';
import type { Endpoint } from './openai-compatible/endpoint.js';
import { UpstreamError, faultError, invalidApiKey, invalidRequest, modelNotFound } from './openai-compatible/errors.js';
import { audioSpeech, audioTranscriptions, imageGenerations } from './openai-compatible/media.js';
import { moderations } from './openai-compatible/moderations.js';
import { embeddings, rerank } from './openai-compatible/retrieval.js';

/**
 * The chat-completions-compatible providers: OpenAI's wire format, each provider under
 * `/<provider>` followed by the path its real base URL has, so only the base URL changes.
 * A provider gets an endpoint only when the catalog gives it a model of that endpoint's kind.
 */
const PROVIDERS: readonly { provider: string; basePath: string }[] = [
  { provider: 'openai', basePath: '/v1' },
  { provider: 'groq', basePath: '/openai/v1' },
  { provider: 'together', basePath: '/v1' },
  { provider: 'fireworks', basePath: '/inference/v1' },
  { provider: 'deepseek', basePath: '/v1' },
  { provider: 'mistral', basePath: '/v1' },
  { provider: 'xai', basePath: '/v1' },
  // Perplexity's API has no version segment: https://api.perplexity.ai/chat/completions.
  { provider: 'perplexity', basePath: '' },
  { provider: 'openrouter', basePath: '/api/v1' },
  { provider: 'cerebras', basePath: '/v1' },
  { provider: 'deepinfra', basePath: '/v1/openai' },
  { provider: 'voyage', basePath: '/v1' },
];

const ENDPOINTS: readonly Endpoint[] = [chatCompletions, embeddings, rerank, moderations, imageGenerations, audioTranscriptions, audioSpeech];

interface MountContext {
  faults: FaultRegistry;
  options: EmulatorOptions;
}

function authenticate(expectedKey: string | undefined) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const presented = /^Bearer\s+(.+)$/i.exec(req.get('authorization') ?? '')?.[1]?.trim();
    if (!expectedKey || presented !== expectedKey) throw invalidApiKey(presented);
    next();
  };
}

/** Every endpoint runs the same steps: body, injected fault, model check, then its handler. */
function serve(provider: string, endpoint: Endpoint, { faults, options }: MountContext) {
  return async (req: Request, res: Response) => {
    const body = endpoint.readBody ? await endpoint.readBody(req) : ((req.body ?? {}) as Record<string, unknown>);
    const modelName = typeof body.model === 'string' ? body.model : endpoint.defaultModel;
    const { proceed, disconnectAfter, chunkIntervalMs } = await applyFault(req, res, { faults, options, provider, model: modelName, errorBody: (status) => faultError(status).toBody() });
    if (!proceed) return;
    if (modelName === undefined) throw invalidRequest('You must provide a model parameter.', 'model', 'missing_required_parameter');
    const model = CATALOG.find((entry) => entry.provider === provider && entry.kind === endpoint.kind && entry.model === modelName);
    if (!model) throw modelNotFound(modelName);
    await endpoint.handle({
      req,
      res,
      provider,
      model,
      body,
      options: chunkIntervalMs === undefined ? options : { ...options, chunkIntervalMs },
      disconnectAfter,
      noteAbandoned: (chunksSent) => faults.noteAbandoned(provider, model.model, chunksSent),
    });
  };
}

function answerError(error: unknown, req: Request, res: Response, _next: NextFunction): void {
  if (res.headersSent) {
    // Mid-stream there is no status left to send; drop the connection as upstream would.
    req.socket.destroy();
    return;
  }
  const parseFailure = (error as { type?: string }).type === 'entity.parse.failed';
  const tooLarge = (error as { type?: string }).type === 'entity.too.large';
  const upstream =
    error instanceof UpstreamError
      ? error
      : parseFailure
        ? invalidRequest('We could not parse the JSON body of your request. The API expects a JSON payload, but what was sent was not valid JSON.')
        : tooLarge
          ? new UpstreamError(413, 'The request body is too large.', 'invalid_request_error', 'request_too_large')
          : faultError(500);
  res.status(upstream.status).json(upstream.toBody());
}

function providerRouter(provider: string, context: MountContext): Router {
  const router = express.Router();
  router.use(authenticate(context.options.credentials.apiKeys[provider]));
  router.use(express.json({ limit: '50mb' }));
  const kinds = new Set(CATALOG.filter((entry) => entry.provider === provider).map((entry) => entry.kind));
  for (const endpoint of ENDPOINTS) {
    if (kinds.has(endpoint.kind)) router.post(endpoint.path, serve(provider, endpoint, context));
  }
  router.get('/models', async (req, res) => {
    const { proceed } = await applyFault(req, res, { ...context, provider, model: undefined, errorBody: (status) => faultError(status).toBody() });
    if (!proceed) return;
    const data = CATALOG.filter((entry) => entry.provider === provider).map((entry) => ({ id: entry.model, object: 'model', created: 1_700_000_000, owned_by: provider }));
    res.json({ object: 'list', data });
  });
  router.use((req) => {
    throw new UpstreamError(404, `Invalid URL (${req.method} ${req.originalUrl.replace(`/${provider}`, '')})`, 'invalid_request_error', null);
  });
  router.use(answerError);
  return router;
}

export const openAiCompatibleStyle: EmulatorStyle = {
  mount(app, context) {
    for (const { provider, basePath } of PROVIDERS) app.use(`/${provider}${basePath}`, providerRouter(provider, context));
    return PROVIDERS.map(({ provider }) => provider);
  },
};
