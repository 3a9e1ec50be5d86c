import { timingSafeEqual } from 'node:crypto';
import express, { type Request, type Response } from 'express';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, startEventStream, streamPieces, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { complete, openAiToolCallDeltas, openAiToolCalls, openAiToolOffer, promptOf, randomId, writeChunks, type Completion } from './wire-shapes.js';

/**
 * IBM watsonx.ai (real base https://<region>.ml.cloud.ibm.com) with IBM Cloud IAM
 * (https://iam.cloud.ibm.com) beside it, both mounted at /watsonx:
 *
 *   POST /identity/token                      form grant_type=urn:ibm:params:oauth:grant-type:apikey&apikey=...
 *   POST /ml/v1/text/chat?version=YYYY-MM-DD   Bearer <IAM token>; {model_id, project_id | space_id, messages, max_tokens}
 *   POST /ml/v1/text/chat_stream?version=...  the same, as SSE (`id: n`, `event: message`, `data: {...}`)
 */
const APIKEY_GRANT = 'urn:ibm:params:oauth:grant-type:apikey';
const TOKEN_LIFETIME_SECONDS = 3600;
const MODELS = new Set(CATALOG.filter((m) => m.provider === 'watsonx' && m.kind === 'chat').map((m) => m.model));
const VERSION = /^\d{4}-\d{2}-\d{2}$/;

/** watsonx.ai's error envelope. */
function watsonxError(status: number, code: string, message: string) {
  return { errors: [{ code, message }], trace: randomId('', 16), status_code: status };
}

const sendWatsonxError = (res: Response, status: number, code: string, message: string) => void res.status(status).json(watsonxError(status, code, message));

/** IBM Cloud IAM's token endpoint errors. */
const sendIamError = (res: Response, status: number, errorCode: string, errorMessage: string) =>
  void res.status(status).json({ errorCode, errorMessage, context: { requestId: randomId('', 16) } });

function sameKey(provided: unknown, expected: string): boolean {
  if (typeof provided !== 'string') return false;
  const a = Buffer.from(provided);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export function watsonxStyle(): EmulatorStyle {
  return {
    mount(app, { faults, options }) {
      const tokens = new Map<string, number>();
      const router = express.Router();

      router.post('/identity/token', express.urlencoded({ extended: false }), (req, res) => {
        const form = (req.body ?? {}) as Record<string, unknown>;
        if (form.grant_type !== APIKEY_GRANT) return sendIamError(res, 400, 'BXNIM0103E', 'Grant type is missing or not supported.');
        if (typeof form.apikey !== 'string' || form.apikey === '') return sendIamError(res, 400, 'BXNIM0109E', 'Property missing or empty: apikey.');
        if (!sameKey(form.apikey, options.credentials.ibmApiKey)) return sendIamError(res, 400, 'BXNIM0415E', 'Provided API key could not be found.');
        const accessToken = randomId('emu-iam-', 32);
        const expiration = Math.floor(Date.now() / 1000) + TOKEN_LIFETIME_SECONDS;
        tokens.set(accessToken, expiration * 1000);
        res.json({ access_token: accessToken, refresh_token: 'not_supported', token_type: 'Bearer', expires_in: TOKEN_LIFETIME_SECONDS, expiration, scope: 'ibm openid' });
      });

      router.use('/ml', (req, res, next) => {
        const token = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '')?.[1];
        if (!token) return sendWatsonxError(res, 401, 'authorization_rejected', 'Failed to authenticate the request due to missing or malformed authorization header.');
        const expiry = tokens.get(token);
        if (expiry === undefined) return sendWatsonxError(res, 401, 'authentication_token_not_valid', 'Failed to authenticate the request due to invalid token: the token was not issued by IAM.');
        if (expiry <= Date.now()) return sendWatsonxError(res, 401, 'authentication_token_expired', 'Failed to authenticate the request due to an expired token.');
        next();
      });
      router.post('/ml/v1/text/:operation', express.json({ limit: '20mb' }), (req, res, next) => {
        const { operation } = req.params as { operation: string };
        if (operation !== 'chat' && operation !== 'chat_stream') return next();
        return handleChat(req, res, operation === 'chat_stream', faults, options);
      });
      router.use((error: unknown, _req: Request, res: Response, next: (error?: unknown) => void) => {
        if (res.headersSent) return next(error);
        sendWatsonxError(res, 400, 'json_type_error', 'The request body is not valid JSON.');
      });
      router.use((req, res) => sendWatsonxError(res, 404, 'not_found', `The requested path ${req.originalUrl} does not exist.`));
      app.use('/watsonx', router);
      return ['watsonx'];
    },
  };
}

async function handleChat(req: Request, res: Response, stream: boolean, faults: FaultRegistry, options: EmulatorOptions): Promise<void> {
  const body = (req.body ?? {}) as { model_id?: unknown; project_id?: unknown; space_id?: unknown; messages?: unknown; max_tokens?: unknown };
  const modelId = typeof body.model_id === 'string' ? body.model_id : undefined;
  const fault = await applyFault(req, res, { faults, options, provider: 'watsonx', model: modelId, errorBody: (status) => watsonxError(status, status === 429 ? 'too_many_requests' : 'internal_error', `The emulator was asked to fail this request with status ${status}.`) });
  if (!fault.proceed) return;

  const version = req.query.version;
  if (typeof version !== 'string' || !VERSION.test(version)) return sendWatsonxError(res, 400, 'invalid_request_entity', "Missing or invalid query parameter 'version': expected YYYY-MM-DD.");
  if (!modelId) return sendWatsonxError(res, 400, 'json_validation_error', "Json document validation error: 'model_id' is required.");
  if (typeof body.project_id !== 'string' && typeof body.space_id !== 'string') return sendWatsonxError(res, 400, 'invalid_input_argument', 'Either space_id or project_id has to be provided.');
  if (!MODELS.has(modelId)) return sendWatsonxError(res, 404, 'model_not_supported', `Model '${modelId}' is not supported.`);
  if (!Array.isArray(body.messages) || body.messages.length === 0) return sendWatsonxError(res, 400, 'json_validation_error', "Json document validation error: 'messages' must contain at least one message.");
  const maxTokens = body.max_tokens;
  if (maxTokens !== undefined && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) return sendWatsonxError(res, 400, 'json_validation_error', "Json document validation error: 'max_tokens' must be a positive integer.");

  const completion = complete(modelId, promptOf(body.messages as { content?: unknown }[]), maxTokens as number | undefined, openAiToolOffer(body));
  const now = new Date();
  const envelope = { id: randomId('chat-', 16), object: stream ? 'chat.completion.chunk' : 'chat.completion', model_id: modelId, model: modelId, created: Math.floor(now.getTime() / 1000), model_version: '1.1.0', created_at: now.toISOString() };
  if (!stream) {
    return void res.json({ ...envelope, choices: [{ index: 0, message: { role: 'assistant', content: completion.toolCalls ? null : completion.text, ...(completion.toolCalls && { tool_calls: openAiToolCalls(completion) }) }, finish_reason: completion.finishReason }], usage: usage(completion) });
  }
  const events = [
    { ...envelope, choices: [{ index: 0, finish_reason: null, delta: { role: 'assistant', content: '' } }] },
    ...(completion.toolCalls ? openAiToolCallDeltas(completion) : streamPieces(completion.text).map((content) => ({ content }))).map((delta) => ({ ...envelope, choices: [{ index: 0, finish_reason: null, delta }] })),
    { ...envelope, choices: [{ index: 0, finish_reason: completion.finishReason, delta: { content: '' } }], usage: usage(completion) },
  ];
  startEventStream(res);
  await writeChunks(req, res, events.map((event, i) => `id: ${i + 1}\nevent: message\ndata: ${JSON.stringify(event)}\n\n`), options, fault.disconnectAfter);
}

const usage = (completion: Completion) => ({ completion_tokens: completion.outputTokens, prompt_tokens: completion.inputTokens, total_tokens: completion.inputTokens + completion.outputTokens });
