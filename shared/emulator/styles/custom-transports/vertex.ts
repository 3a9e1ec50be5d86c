import express, { type Request, type Response } from 'express';
import { errors as joseErrors, importSPKI, jwtVerify } from 'jose';
import { CATALOG } from '../../../models/catalog.js';
import { applyFault, startEventStream, streamPieces, type EmulatorCredentials, type EmulatorOptions, type FaultRegistry } from '../../core.js';
import type { EmulatorStyle } from '../../server.js';
import { anthropicMessage, anthropicStreamEvents, anthropicToolOffer, complete, geminiToolOffer, namedSseFrame, parseAnthropicBody, promptOf, randomId, writeChunks, type Completion } from './wire-shapes.js';

/**
 * Google Vertex AI (real base https://<region>-aiplatform.googleapis.com), mounted at /vertex,
 * with Google's OAuth token endpoint beside it at /vertex/token.
 *
 *   POST /token   JWT-bearer grant: an RS256 assertion signed with the service account's key,
 *                 iss = its client email, aud = this token endpoint's URL as the client addressed it
 *                 (e.g. http://127.0.0.1:PORT/vertex/token, the key file's token_uri), scope with
 *                 cloud-platform, at most an hour between iat and exp → a one-hour access token.
 *   POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict | :streamRawPredict
 *   POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent | :streamGenerateContent[?alt=sse]
 *
 * Model calls need `Authorization: Bearer <an issued, unexpired token>` and the service account's project.
 * Models: the anthropic catalog entries' cloud2 ids, and the catalog's vertex models (Gemini).
 */
const CLOUD_PLATFORM_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const TOKEN_LIFETIME_SECONDS = 3600;
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

const ANTHROPIC_MODELS = new Map(CATALOG.flatMap((m) => (m.cloudIds ? [[m.cloudIds.cloud2, m.model] as const] : [])));
const GEMINI_MODELS = new Set(CATALOG.filter((m) => m.provider === 'vertex' && m.kind === 'chat').map((m) => m.model));

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/** Google's API error envelope. */
function googleError(status: number, message: string) {
  return { error: { code: status, message, status: STATUS_NAMES[status] ?? (status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION') } };
}

const sendGoogleError = (res: Response, status: number, message: string) => void res.status(status).json(googleError(status, message));

/** OAuth 2 token endpoint errors are `{error, error_description}`, not the API envelope. */
const sendOAuthError = (res: Response, error: string, description: string) => void res.status(400).json({ error, error_description: description });

class AccessTokens {
  private expiries = new Map<string, number>();

  issue(): string {
    const token = `ya29.${randomId('emu', 32)}`;
    this.expiries.set(token, Date.now() + TOKEN_LIFETIME_SECONDS * 1000);
    return token;
  }

  isValid(token: string): boolean {
    const expiry = this.expiries.get(token);
    if (expiry === undefined) return false;
    if (expiry > Date.now()) return true;
    this.expiries.delete(token);
    return false;
  }
}

async function exchangeAssertion(req: Request, res: Response, account: EmulatorCredentials['googleServiceAccount'], publicKey: ReturnType<typeof importSPKI>, tokens: AccessTokens) {
  const form = (req.body ?? {}) as Record<string, unknown>;
  if (form.grant_type !== JWT_BEARER_GRANT) return sendOAuthError(res, 'unsupported_grant_type', `Invalid grant_type: ${String(form.grant_type ?? '')}`);
  if (typeof form.assertion !== 'string' || form.assertion === '') return sendOAuthError(res, 'invalid_request', 'Missing required parameter: assertion');
  const tokenUrl = `${req.protocol}://${req.get('host')}${req.baseUrl}/token`;
  let claims: Record<string, unknown>;
  try {
    ({ payload: claims } = await jwtVerify(form.assertion, await publicKey, { algorithms: ['RS256'], requiredClaims: ['iss', 'aud', 'exp', 'iat'] }));
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) return sendOAuthError(res, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.');
    if (error instanceof joseErrors.JWTClaimValidationFailed) return sendOAuthError(res, 'invalid_grant', `Invalid JWT: ${error.message}`);
    return sendOAuthError(res, 'invalid_grant', 'Invalid JWT Signature.');
  }
  if (claims.iss !== account.clientEmail) return sendOAuthError(res, 'invalid_grant', 'Invalid grant: account not found');
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(tokenUrl)) return sendOAuthError(res, 'invalid_grant', `Invalid JWT: Failed audience check. The right audience is ${tokenUrl}`);
  const now = Math.floor(Date.now() / 1000);
  const { iat, exp } = claims as { iat: number; exp: number };
  if (iat > now + 300 || exp - iat > TOKEN_LIFETIME_SECONDS) {
    return sendOAuthError(res, 'invalid_grant', 'Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.');
  }
  const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ') : [];
  if (!scopes.includes(CLOUD_PLATFORM_SCOPE)) return sendOAuthError(res, 'invalid_scope', `Invalid OAuth scope or ID token audience provided; the scope must include ${CLOUD_PLATFORM_SCOPE}.`);
  res.json({ access_token: tokens.issue(), expires_in: TOKEN_LIFETIME_SECONDS, token_type: 'Bearer' });
}

export function vertexStyle(): EmulatorStyle {
  return {
    mount(app, { faults, options }) {
      const account = options.credentials.googleServiceAccount;
      const publicKey = importSPKI(account.publicKeyPem, 'RS256');
      publicKey.catch(() => undefined); // a bad key fails each exchange, not the process
      const tokens = new AccessTokens();
      const router = express.Router();

      router.post('/token', express.urlencoded({ extended: false }), (req, res) => exchangeAssertion(req, res, account, publicKey, tokens));

      router.use('/v1', (req, res, next) => {
        const token = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '')?.[1];
        if (!token || !tokens.isValid(token)) {
          res.setHeader('www-authenticate', 'Bearer realm="https://accounts.google.com/"');
          return sendGoogleError(
            res,
            401,
            'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.',
          );
        }
        next();
      });
      router.post('/v1/projects/:project/locations/:location/publishers/:publisher/models/:modelAction', express.json({ limit: '20mb' }), (req, res) =>
        handleModelCall(req, res, faults, options),
      );
      router.use((error: unknown, _req: Request, res: Response, next: (error?: unknown) => void) => {
        if (res.headersSent) return next(error);
        sendGoogleError(res, 400, 'Invalid JSON payload received.');
      });
      router.use((req, res) => sendGoogleError(res, 404, `The requested URL ${req.originalUrl} was not found on this server.`));
      app.use('/vertex', router);
      return ['vertex'];
    },
  };
}

async function handleModelCall(req: Request, res: Response, faults: FaultRegistry, options: EmulatorOptions): Promise<void> {
  const { project, location, publisher, modelAction } = req.params as { project: string; location: string; publisher: string; modelAction: string };
  const at = modelAction.lastIndexOf(':');
  const [model, action] = at === -1 ? [modelAction, ''] : [modelAction.slice(0, at), modelAction.slice(at + 1)];
  const resource = `projects/${project}/locations/${location}/publishers/${publisher}/models/${model}`;
  if (project !== options.credentials.googleServiceAccount.projectId) {
    return sendGoogleError(res, 403, `Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/${resource}' (or it may not exist).`);
  }
  const fault = await applyFault(req, res, { faults, options, provider: 'vertex', model, errorBody: (status) => googleError(status, `The emulator was asked to fail this request with status ${status}.`) });
  if (!fault.proceed) return;

  if (publisher === 'anthropic' && (action === 'rawPredict' || action === 'streamRawPredict')) {
    const responseModel = ANTHROPIC_MODELS.get(model);
    if (!responseModel) return sendGoogleError(res, 404, `Publisher Model \`${resource}\` not found.`);
    const parsed = parseAnthropicBody(req.body, 'vertex-2023-10-16');
    // Vertex passes Anthropic's own validation errors through in Anthropic's shape.
    if ('error' in parsed) return void res.status(400).json({ type: 'error', error: { type: 'invalid_request_error', message: parsed.error } });
    const completion = complete(model, parsed.prompt, parsed.maxTokens, anthropicToolOffer(req.body));
    const id = randomId('msg_vrtx_');
    if (action === 'rawPredict') return void res.json(anthropicMessage(id, responseModel, completion));
    startEventStream(res);
    return writeChunks(req, res, anthropicStreamEvents(id, responseModel, completion).map(namedSseFrame), options, fault.disconnectAfter);
  }

  if (publisher === 'google' && (action === 'generateContent' || action === 'streamGenerateContent')) {
    if (!GEMINI_MODELS.has(model)) return sendGoogleError(res, 404, `Publisher Model \`${resource}\` not found.`);
    const body = (req.body ?? {}) as { contents?: unknown; systemInstruction?: { parts?: unknown }; generationConfig?: { maxOutputTokens?: unknown } };
    if (!Array.isArray(body.contents) || body.contents.length === 0) return sendGoogleError(res, 400, 'Unable to submit request because it must include at least one parts field.');
    const maxTokens = body.generationConfig?.maxOutputTokens;
    if (maxTokens !== undefined && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) {
      return sendGoogleError(res, 400, 'Invalid value at generation_config.max_output_tokens: must be a positive integer.');
    }
    const completion = complete(model, promptOf(body.contents as { parts?: unknown }[], body.systemInstruction?.parts), maxTokens as number | undefined, geminiToolOffer(body));
    if (action === 'generateContent') return void res.json(geminiResponse(model, completion, geminiParts(completion), true));
    const chunks = geminiStreamChunks(model, completion);
    if (req.query.alt === 'sse') {
      startEventStream(res);
      return writeChunks(req, res, chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`), options, fault.disconnectAfter);
    }
    // Without alt=sse Google streams one JSON array, element by element.
    res.status(200).setHeader('content-type', 'application/json; charset=UTF-8');
    res.flushHeaders();
    const pieces = chunks.map((chunk, i) => `${i === 0 ? '[' : ',\r\n'}${JSON.stringify(chunk)}${i === chunks.length - 1 ? ']' : ''}`);
    return writeChunks(req, res, pieces, options, fault.disconnectAfter);
  }
  sendGoogleError(res, 404, `Method '${action}' is not available for publisher model \`${resource}\`.`);
}

/** A candidate's parts: one functionCall part per tool call, else the text. */
const geminiParts = (completion: Completion) =>
  completion.toolCalls ? completion.toolCalls.map((call) => ({ functionCall: { name: call.name, args: call.arguments } })) : [{ text: completion.text }];

function geminiResponse(model: string, completion: Completion, parts: unknown[], final: boolean) {
  return {
    candidates: [
      {
        content: { role: 'model', parts },
        ...(final ? { finishReason: completion.finishReason === 'length' ? 'MAX_TOKENS' : 'STOP' } : {}),
      },
    ],
    ...(final
      ? { usageMetadata: { promptTokenCount: completion.inputTokens, candidatesTokenCount: completion.outputTokens, totalTokenCount: completion.inputTokens + completion.outputTokens } }
      : {}),
    modelVersion: model,
  };
}

/** One chunk per word, or per function call; the last carries the finish reason and the usage. */
function geminiStreamChunks(model: string, completion: Completion) {
  const pieces = completion.toolCalls ? geminiParts(completion) : streamPieces(completion.text).map((text) => ({ text }));
  return pieces.map((part, i) => geminiResponse(model, completion, [part], i === pieces.length - 1));
}
