import { ClientError } from './errors.js';

/**
 * Calls to the hive: every API route is POST with a JSON body, and every refusal is
 * `{"error": "<message>"}` with its status, which becomes a ClientError carrying both.
 */
export class HiveHttp {
  constructor(
    readonly server: string,
    private readonly token: string | null,
  ) {}

  /** POST `path` and the parsed JSON answer. */
  async post<T = any>(path: string, body: unknown = {}): Promise<T> {
    const response = await this.send(path, body);
    const text = await response.text();
    if (!response.ok) throw refusal(response, text);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ClientError(`${this.server}${path} answered ${response.status} with something other than JSON.`, { status: response.status });
    }
  }

  /** POST `path` and the response itself, for an answer streamed as JSON lines (export). */
  async stream(path: string, body: unknown = {}): Promise<Response> {
    const response = await this.send(path, body);
    if (!response.ok) throw refusal(response, await response.text());
    return response;
  }

  private async send(path: string, body: unknown): Promise<Response> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    try {
      return await fetch(`${this.server}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new ClientError(`Cannot reach the hive at ${this.server}: ${cause?.code ?? cause?.message ?? (error as Error).message}.`);
    }
  }
}

function refusal(response: Response, text: string): ClientError {
  let message = `HTTP ${response.status}`;
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (typeof parsed.error === 'string') message = parsed.error;
  } catch {
    if (text.trim()) message = `${message}: ${text.trim().slice(0, 200)}`;
  }
  return new ClientError(message, { status: response.status });
}
