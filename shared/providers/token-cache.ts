import { upstreamFetch, type UpstreamResponse } from './http.js';
import { UpstreamError } from './types.js';

/**
 * A provider's short-lived access token (Vertex's service-account token, watsonx's IAM token),
 * minted on demand and reused until shortly before it expires. Concurrent callers share one
 * exchange in flight, which runs under its own deadline rather than any one caller's signal,
 * while each caller still stops waiting at its own abort. A token the API refused (401) is dropped.
 */

export interface MintedToken {
  token: string;
  expiresInSeconds: number;
}

/** A token is replaced this long before it expires, so none expires in flight. */
const REFRESH_MARGIN_MS = 60_000;
/** A token exchange is shared by concurrent callers, so it has its own deadline rather than one caller's signal. */
const TOKEN_EXCHANGE_TIMEOUT_MS = 30_000;

export class AccessTokenCache {
  private cached: { token: string; refreshAt: number } | undefined;
  private inFlight: Promise<string> | undefined;

  /** `mint` exchanges credentials for a token; `signal` is the exchange's own deadline. */
  constructor(private readonly mint: (signal: AbortSignal) => Promise<MintedToken>) {}

  get(signal: AbortSignal): Promise<string> {
    if (this.cached && Date.now() < this.cached.refreshAt) return Promise.resolve(this.cached.token);
    this.inFlight ??= this.exchange().finally(() => {
      this.inFlight = undefined;
    });
    return untilAborted(this.inFlight, signal);
  }

  /** After a 401 from the API the token is no good, whatever its expiry said. */
  forget(token: string): void {
    if (this.cached?.token === token) this.cached = undefined;
  }

  /** Sends a request with the current token, dropping the token when the API answers 401. */
  async authorized(signal: AbortSignal, send: (token: string) => Promise<UpstreamResponse>): Promise<UpstreamResponse> {
    const token = await this.get(signal);
    try {
      return await send(token);
    } catch (error) {
      if (error instanceof UpstreamError && error.status === 401) this.forget(token);
      throw error;
    }
  }

  private async exchange(): Promise<string> {
    const { token, expiresInSeconds } = await this.mint(AbortSignal.timeout(TOKEN_EXCHANGE_TIMEOUT_MS));
    this.cached = { token, refreshAt: Date.now() + expiresInSeconds * 1000 - REFRESH_MARGIN_MS };
    return token;
  }
}

/**
 * POSTs a form to a token endpoint. A token endpoint refuses bad credentials with a 4xx (400
 * invalid_grant, IAM's 400 BXNIM0415E): that is an authentication failure, so it becomes a 401.
 */
export async function postTokenForm(provider: string, url: string, form: Record<string, string>, signal: AbortSignal, refusal: string): Promise<UpstreamResponse> {
  try {
    return await upstreamFetch(provider, url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
      signal,
    });
  } catch (error) {
    if (error instanceof UpstreamError && error.status !== undefined && error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429) {
      throw new UpstreamError(provider, 401, `${refusal} (${error.message})`, false);
    }
    throw error;
  }
}

/** Waits for a shared promise while still honouring this caller's own abort. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
