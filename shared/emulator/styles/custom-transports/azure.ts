import { timingSafeEqual } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, startEventStream, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { complete, openAiToolCallDeltas, openAiToolCalls, openAiToolOffer, promptOf, randomId, writeChunks, type Completion } from './wire-shapes.js';

/**
 * Azure OpenAI (real base https://<resource>.openai.azure.com), mounted at /azure:
 *
 *   POST /openai/deployments/{deployment}/chat/completions?api-version=YYYY-MM-DD[-preview]
 *
 * Authenticated by the `api-key` header only (Entra ID bearer tokens are not emulated). A deployment
 * is named after its catalog model (provider azure). Answers are OpenAI's chat.completion and
 * chat.completion.chunk shapes with Azure's content-filter annotations.
 */
const DEPLOYMENTS = new Set(CATALOG.filter((m) => m.provider === 'azure' && m.kind === 'chat').map((m) => m.model));
const API_VERSION = /^\d{4}-\d{2}-\d{2}(-preview)?$/;
const INVALID_KEY =
  'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.';

/** Azure's error envelope: the code is a string (an HTTP status or a name). */
const azureError = (code: string, message: string) => ({ error: { code, message } });

const NO_FILTER = { hate: { filtered: false, severity: 'safe' }, self_harm: { filtered: false, severity: 'safe' }, sexual: { filtered: false, severity: 'safe' }, violence: { filtered: false, severity: 'safe' } };
const PROMPT_FILTER_RESULTS = [{ prompt_index: 0, content_filter_results: NO_FILTER }];

function sameKey(provided: string | undefined, expected: string | undefined): boolean {
  if (provided === undefined || expected === undefined) return false;
  const a = Buffer.from(provided);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function azureStyle(): EmulatorStyle {
  return {
    mount(app, { faults, options }) {
      const router = express.Router();
      router.use((req, res, next) => {
        if (!sameKey(req.get('api-key'), options.credentials.apiKeys.azure)) return void res.status(401).json(azureError('401', INVALID_KEY));
        // Azure answers a missing or unknown api-version as an unknown resource.
        const apiVersion = req.query['api-version'];
        if (typeof apiVersion !== 'string' || !API_VERSION.test(apiVersion)) return void res.status(404).json(azureError('404', 'Resource not found'));
        next();
      });
      router.post('/openai/deployments/:deployment/chat/completions', express.json({ limit: '20mb' }), (req, res) => handleChat(req, res, faults, options));
      router.use((error: unknown, _req: Request, res: Response, next: (error?: unknown) => void) => {
        if (res.headersSent) return next(error);
        res.status(400).json({ error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error', param: null, code: null } });
      });
      router.use((_req, res) => void res.status(404).json(azureError('404', 'Resource not found')));
      app.use('/azure', router);
      return ['azure'];
    },
  };
}

async function handleChat(req: Request, res: Response, faults: FaultRegistry, options: EmulatorOptions): Promise<void> {
  const { deployment } = req.params as { deployment: string };
  const fault = await applyFault(req, res, { faults, options, provider: 'azure', model: deployment, errorBody: (status) => azureError(String(status), `The emulator was asked to fail this request with status ${status}.`) });
  if (!fault.proceed) return;
  if (!DEPLOYMENTS.has(deployment)) {
    return void res
      .status(404)
      .json(azureError('DeploymentNotFound', 'The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.'));
  }
  const body = (req.body ?? {}) as { messages?: unknown; max_tokens?: unknown; max_completion_tokens?: unknown; stream?: unknown; stream_options?: { include_usage?: unknown } };
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return void res.status(400).json({ error: { message: "'messages' is a required property", type: 'invalid_request_error', param: 'messages', code: null } });
  }
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) {
    return void res.status(400).json({ error: { message: 'max_tokens must be a positive integer.', type: 'invalid_request_error', param: 'max_tokens', code: 'integer_below_min_value' } });
  }
  const completion = complete(deployment, promptOf(body.messages as { content?: unknown }[]), (maxTokens ?? undefined) as number | undefined, openAiToolOffer(body));
  const id = randomId('chatcmpl-', 14);
  const created = Math.floor(Date.now() / 1000);
  if (body.stream !== true) {
    return void res.json({
      id,
      object: 'chat.completion',
      created,
      model: deployment,
      system_fingerprint: 'fp_emulator',
      prompt_filter_results: PROMPT_FILTER_RESULTS,
      choices: [{ index: 0, message: { role: 'assistant', content: completion.toolCalls ? null : completion.text, refusal: null, ...(completion.toolCalls && { tool_calls: openAiToolCalls(completion) }) }, finish_reason: completion.finishReason, logprobs: null, content_filter_results: NO_FILTER }],
      usage: usage(completion),
    });
  }
  const includeUsage = body.stream_options?.include_usage === true;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model: deployment,
    system_fingerprint: 'fp_emulator',
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const events: unknown[] = [
    // Azure opens every stream with the prompt's filter results and no choices.
    { id: '', object: '', created: 0, model: '', choices: [], prompt_filter_results: PROMPT_FILTER_RESULTS },
    chunk([{ index: 0, delta: { role: 'assistant', content: completion.toolCalls ? null : '', refusal: null }, finish_reason: null, logprobs: null }]),
    ...(completion.toolCalls ? openAiToolCallDeltas(completion) : streamPieces(completion.text).map((content) => ({ content }))).map((delta) =>
      chunk([{ index: 0, delta, finish_reason: null, logprobs: null, content_filter_results: NO_FILTER }]),
    ),
    chunk([{ index: 0, delta: {}, finish_reason: completion.finishReason, logprobs: null, content_filter_results: {} }]),
    ...(includeUsage ? [chunk([], { usage: usage(completion) })] : []),
  ];
  startEventStream(res);
  await writeChunks(req, res, [...events.map((event) => `data: ${JSON.stringify(event)}\n\n`), 'data: [DONE]\n\n'], options, fault.disconnectAfter);
}

const usage = (completion: Completion) => ({ prompt_tokens: completion.inputTokens, completion_tokens: completion.outputTokens, total_tokens: completion.inputTokens + completion.outputTokens });
