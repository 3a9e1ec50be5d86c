import diagnosticsChannel from 'node:diagnostics_channel';
import { getGlobalDispatcher, MockAgent, setGlobalDispatcher, type Dispatcher } from 'undici';

/**
 * What the provider adapters send upstream, seen from outside: undici publishes every request it
 * creates on a diagnostics channel, so a test can read the URL, headers and body of each call while
 * the call itself still goes to the emulator untouched.
 */
export interface UpstreamRequestSeen {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
}

interface CreatedRequest {
  origin: string | URL;
  path: string;
  method: string;
  headers: string[] | string;
  body: unknown;
}

export function watchUpstreamRequests(): { requests: UpstreamRequestSeen[]; stop(): void } {
  const requests: UpstreamRequestSeen[] = [];
  const onCreate = (message: unknown) => {
    const request = (message as { request: CreatedRequest }).request;
    requests.push({ url: `${String(request.origin).replace(/\/$/, '')}${request.path}`, method: request.method, headers: headersOf(request.headers), body: bodyText(request.body) });
  };
  diagnosticsChannel.subscribe('undici:request:create', onCreate);
  return { requests, stop: () => diagnosticsChannel.unsubscribe('undici:request:create', onCreate) };
}

/** undici keeps headers as [name, value, ...] (or, in older builds, one "name: value\r\n" string). */
function headersOf(raw: string[] | string): Record<string, string> {
  const headers: Record<string, string> = {};
  if (typeof raw === 'string') {
    for (const line of raw.split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    return headers;
  }
  for (let i = 0; i + 1 < raw.length; i += 2) headers[String(raw[i]).toLowerCase()] = String(raw[i + 1]);
  return headers;
}

function bodyText(body: unknown): string {
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return Buffer.from(body).toString('utf8');
  return '';
}

/**
 * Answers upstream calls to hosts this machine cannot reach (a real provider's host) or with bytes
 * no emulator sends (a hand-made event stream): a MockAgent stands in as the process's dispatcher
 * until `restore()`; calls it has no answer for still go out to the network (the emulator).
 */
export function answerUpstream(): { agent: MockAgent; restore(): Promise<void> } {
  const previous: Dispatcher = getGlobalDispatcher();
  const agent = new MockAgent();
  agent.enableNetConnect();
  setGlobalDispatcher(agent);
  return {
    agent,
    async restore() {
      setGlobalDispatcher(previous);
      await agent.close();
    },
  };
}
