/**
 * The one error envelope of the chat-completions-compatible providers: OpenAI's
 * `{"error":{"message","type","param","code"}}`, which the others copy. Every error this style
 * answers (auth, validation, unknown model, injected faults) is built here.
 */
export class UpstreamError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | null,
    readonly param: string | null = null,
  ) {
    super(message);
  }

  toBody(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** OpenAI shows the first and last characters of a wrong key; never the whole key. */
function maskKey(key: string | undefined): string {
  if (!key) return '(none)';
  if (key.length <= 8) return '*'.repeat(key.length);
  return `${key.slice(0, 3)}${'*'.repeat(key.length - 7)}${key.slice(-4)}`;
}

export const invalidApiKey = (key: string | undefined) =>
  new UpstreamError(
    401,
    `Incorrect API key provided: ${maskKey(key)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
    'invalid_request_error',
    'invalid_api_key',
  );

export const modelNotFound = (model: string) =>
  new UpstreamError(404, `The model \`${model}\` does not exist or you do not have access to it.`, 'invalid_request_error', 'model_not_found');

export const invalidRequest = (message: string, param: string | null = null, code: string | null = null) =>
  new UpstreamError(400, message, 'invalid_request_error', code, param);

/** The body an injected status fault answers with, as the real API words that status. */
export function faultError(status: number): UpstreamError {
  switch (status) {
    case 400:
      return invalidRequest('The request was rejected by the emulated upstream.');
    case 401:
      return invalidApiKey(undefined);
    case 403:
      return new UpstreamError(403, 'You are not allowed to sample from this model.', 'invalid_request_error', 'permission_denied');
    case 404:
      return new UpstreamError(404, 'The requested resource was not found.', 'invalid_request_error', 'not_found');
    case 408:
      return new UpstreamError(408, 'Request timed out.', 'invalid_request_error', 'timeout');
    case 409:
      return new UpstreamError(409, 'The request conflicts with another request in flight.', 'invalid_request_error', 'conflict');
    case 429:
      return new UpstreamError(429, 'Rate limit reached for requests. Please try again later.', 'requests', 'rate_limit_exceeded');
    case 500:
      return new UpstreamError(500, 'The server had an error while processing your request. Sorry about that!', 'server_error', 'server_error');
    case 502:
      return new UpstreamError(502, 'Bad gateway.', 'server_error', 'bad_gateway');
    case 503:
      return new UpstreamError(503, 'The engine is currently overloaded, please try again later.', 'server_error', 'service_unavailable');
    default:
      return status >= 500
        ? new UpstreamError(status, `The upstream failed with status ${status}.`, 'server_error', 'server_error')
        : new UpstreamError(status, `The upstream rejected the request with status ${status}.`, 'invalid_request_error', null);
  }
}
