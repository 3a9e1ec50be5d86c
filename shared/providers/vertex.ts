import { importPKCS8, SignJWT } from 'jose';
import { anthropicChatResult, anthropicMessagesBody, anthropicStreamEvents, wantsJsonAnswer, type AnthropicMessage } from './anthropic.js';
import { geminiChatResult, geminiGenerateContentBody, geminiStreamEvents, type GeminiResponse } from './gemini.js';
import { readJson, upstreamFetch } from './http.js';
import type { VertexSettings } from './settings.js';
import { AccessTokenCache, postTokenForm } from './token-cache.js';
import { UpstreamError, type ChatRequest, type ProviderAdapter } from './types.js';

/**
 * Google Vertex AI, authenticated as a service account: a JWT-bearer assertion signed RS256 with
 * the account's key is exchanged at its token URI for a one-hour access token, held in an
 * AccessTokenCache (token-cache.ts).
 *
 * Two publishers behind one token:
 * - anthropic models on the cloud2 route (`@us-cloud2` / `@eu-cloud2`; upstreamModel is the cloud2
 *   id): `:rawPredict` / `:streamRawPredict` with Anthropic's messages body and SSE events;
 * - Google's own models (catalog provider vertex, Gemini): `:generateContent` /
 *   `:streamGenerateContent?alt=sse`.
 * The bodies, results and stream events are those of the anthropic and gemini adapters (their
 * exported mappings); this file holds only Vertex's transport: where a call goes and its token.
 */
const PROVIDER = 'vertex';
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ASSERTION_LIFETIME_SECONDS = 3600;
/** Claude on Vertex takes Anthropic's Messages body with this version in it, and the model in the URL. */
const ANTHROPIC_VERSION = 'vertex-2023-10-16';

/** Exchanges a JWT-bearer assertion, signed RS256 with the service account's key, for an access token. */
function createAccessTokens(settings: VertexSettings): AccessTokenCache {
  let privateKey: ReturnType<typeof importPKCS8> | undefined;
  return new AccessTokenCache(async (signal) => {
    privateKey ??= importPKCS8(settings.privateKeyPem, 'RS256');
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(settings.clientEmail)
      .setAudience(settings.tokenUri)
      .setIssuedAt(now)
      .setExpirationTime(now + ASSERTION_LIFETIME_SECONDS)
      .sign(await privateKey);
    const response = await postTokenForm(PROVIDER, settings.tokenUri, { grant_type: JWT_BEARER_GRANT, assertion }, signal, 'service-account token exchange refused');
    const body = await readJson<{ access_token?: string; expires_in?: number }>(PROVIDER, response, signal);
    if (!body.access_token) throw new UpstreamError(PROVIDER, response.status, 'token endpoint answered without an access_token', true);
    return { token: body.access_token, expiresInSeconds: body.expires_in ?? ASSERTION_LIFETIME_SECONDS };
  });
}

const DEFAULT_HOST = /^https:\/\/([a-z0-9-]+)-aiplatform\.googleapis\.com$/;
const GEOGRAPHY_DEFAULT_LOCATION = { eu: 'europe-west1', us: 'us-east5' } as const;

/**
 * Where a call goes. A region suffix picks a location in its geography (the configured one when it
 * already is there, else europe-west1 / us-east5); with the default regional host the host follows
 * the location, while a VERTEX_BASE_URL override (the emulator) is kept as is.
 */
function placeOf(settings: VertexSettings, request: ChatRequest): { baseUrl: string; location: string } {
  const geography = request.region?.startsWith('eu') ? 'eu' : request.region?.startsWith('us') ? 'us' : undefined;
  if (!geography) return { baseUrl: settings.baseUrl, location: settings.location };
  const inGeography = geography === 'eu' ? settings.location.startsWith('europe-') : settings.location.startsWith('us-');
  const location = inGeography ? settings.location : GEOGRAPHY_DEFAULT_LOCATION[geography];
  const baseUrl = DEFAULT_HOST.test(settings.baseUrl) ? `https://${location}-aiplatform.googleapis.com` : settings.baseUrl;
  return { baseUrl, location };
}

export function createVertexAdapter(settings: VertexSettings): ProviderAdapter {
  const tokens = createAccessTokens(settings);
  const modelsUrl = (request: ChatRequest, publisher: string) => {
    const { baseUrl, location } = placeOf(settings, request);
    return `${baseUrl}/v1/projects/${settings.projectId}/locations/${location}/publishers/${publisher}/models`;
  };

  const post = (request: ChatRequest, url: string, body: unknown) =>
    tokens.authorized(request.signal, (token) =>
      upstreamFetch(PROVIDER, url, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: request.signal,
      }),
    );

  const isAnthropic = (request: ChatRequest) => request.model.provider === 'anthropic';
  const anthropicBody = (request: ChatRequest) => ({ anthropic_version: ANTHROPIC_VERSION, ...anthropicMessagesBody(PROVIDER, request) });

  return {
    provider: PROVIDER,

    async chat(request) {
      if (isAnthropic(request)) {
        const response = await post(request, `${modelsUrl(request, 'anthropic')}/${request.upstreamModel}:rawPredict`, anthropicBody(request));
        return anthropicChatResult(await readJson<AnthropicMessage>(PROVIDER, response, request.signal), wantsJsonAnswer(request));
      }
      const response = await post(request, `${modelsUrl(request, 'google')}/${request.upstreamModel}:generateContent`, geminiGenerateContentBody(PROVIDER, request));
      return geminiChatResult(await readJson<GeminiResponse>(PROVIDER, response, request.signal));
    },

    async *chatStream(request) {
      if (isAnthropic(request)) {
        const response = await post(request, `${modelsUrl(request, 'anthropic')}/${request.upstreamModel}:streamRawPredict`, { ...anthropicBody(request), stream: true });
        yield* anthropicStreamEvents(PROVIDER, response, request.signal, wantsJsonAnswer(request));
      } else {
        const response = await post(request, `${modelsUrl(request, 'google')}/${request.upstreamModel}:streamGenerateContent?alt=sse`, geminiGenerateContentBody(PROVIDER, request));
        yield* geminiStreamEvents(PROVIDER, response, request.signal);
      }
    },
  };
}
