import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { catalogModel } from '../shared/models/catalog.js';
import { createOpenAiCompatibleAdapter } from '../shared/providers/openai-compatible.js';
import { UpstreamError, type ChatRequest, type ChatStreamEvent, type ProviderAdapter } from '../shared/providers/types.js';
import { createFullEmulator } from '../shared/emulator/emulator.js';

let server: Server;
let url: string;
let keys: Record<string, string>;

beforeAll(async () => {
  const emulator = createFullEmulator();
  keys = emulator.credentials.apiKeys;
  server = await listen(emulator.app, 0, '127.0.0.1');
  url = serverUrl(server);
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
afterEach(() => fetch(`${url}/_emulator/faults`, { method: 'DELETE' }));

const BASE_PATHS: Record<string, string> = { openai: '/openai/v1', groq: '/groq/openai/v1', perplexity: '/perplexity', mistral: '/mistral/v1', voyage: '/voyage/v1' };
const adapter = (provider: string, key = keys[provider]!) => createOpenAiCompatibleAdapter(provider, { kind: 'key', baseUrl: `${url}${BASE_PATHS[provider]}`, apiKey: key });

function chatRequest(modelId: string, content: string, extra: Partial<ChatRequest> = {}): ChatRequest {
  const model = catalogModel(modelId)!;
  return { model, upstreamModel: model.model, region: undefined, messages: [{ role: 'user', content }], maxTokens: undefined, signal: new AbortController().signal, ...extra };
}

async function collect(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}

const fault = (body: unknown) => fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe.each([
  ['openai', 'svc:openai/gpt-4o-mini'],
  ['groq', 'svc:groq/llama-3.3-70b-versatile'],
  ['perplexity', 'svc:perplexity/sonar'],
  ['mistral', 'svc:mistral/mistral-small-latest'],
])('%s through the chat-completions adapter', (provider, modelId) => {
  it('completes, with usage, the same way twice', async () => {
    const first = await adapter(provider).chat!(chatRequest(modelId, 'Say hello to the gateway'));
    const second = await adapter(provider).chat!(chatRequest(modelId, 'Say hello to the gateway'));
    expect(first.content).toMatch(/\w+/);
    expect(first).toEqual(second);
    expect(first.finishReason).toBe('stop');
    expect(first.usage.inputTokens).toBeGreaterThan(0);
    expect(first.usage.outputTokens).toBe(first.content!.split(' ').length);
  });

  it('streams the same content, then finish, then usage last', async () => {
    const request = chatRequest(modelId, 'Stream to me please');
    const whole = await adapter(provider).chat!(request);
    const events = await collect(adapter(provider).chatStream!(chatRequest(modelId, 'Stream to me please')));
    const text = events.flatMap((event) => (event.type === 'delta' && event.content ? [event.content] : [])).join('');
    expect(text).toBe(whole.content);
    expect(events.at(-2)).toEqual({ type: 'finish', finishReason: 'stop' });
    expect(events.at(-1)).toEqual({ type: 'usage', usage: whole.usage });
  });
});

describe('mapping', () => {
  const openai = () => adapter('openai');

  it('honours the token limit with finish reason length', async () => {
    const result = await openai().chat!(chatRequest('svc:openai/gpt-4o-mini', 'a long answer please', { maxTokens: 3 }));
    expect(result.finishReason).toBe('length');
    expect(result.usage.outputTokens).toBe(3);
  });

  it('returns tool calls', async () => {
    const result = await openai().chat!(
      chatRequest('svc:openai/gpt-4o-mini', 'EMULATOR_CALL_TOOL now', { tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }] }),
    );
    expect(result.finishReason).toBe('tool_calls');
    expect(result.toolCalls?.[0]?.function.name).toBe('lookup');
  });

  it('strips the gateway-only cache_control field before sending', async () => {
    const result = await openai().chat!(
      chatRequest('svc:openai/gpt-4o-mini', 'x', { messages: [{ role: 'system', content: 'be brief', cache_control: { type: 'ephemeral' } }, { role: 'user', content: 'hi' }] }),
    );
    expect(result.content).toMatch(/\w/);
  });

  it('embeds with the model dimensions, in input order', async () => {
    const model = catalogModel('svc:openai/text-embedding-3-small')!;
    const result = await openai().embeddings!({ model, upstreamModel: model.model, input: ['one', 'two', 'three'], signal: new AbortController().signal });
    expect(result.embeddings).toHaveLength(3);
    expect(result.embeddings[0]).toHaveLength(1536);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    const short = await openai().embeddings!({ model, upstreamModel: model.model, input: ['one'], dimensions: 256, signal: new AbortController().signal });
    expect(short.embeddings[0]).toHaveLength(256);
    const voyageModel = catalogModel('svc:voyage/voyage-3-lite')!;
    const voyage = await adapter('voyage').embeddings!({ model: voyageModel, upstreamModel: voyageModel.model, input: ['q'], signal: new AbortController().signal });
    expect(voyage.embeddings[0]).toHaveLength(512);
  });
});

describe('failures', () => {
  it('a wrong key is a non-retryable 401', async () => {
    const failure = await adapter('openai', 'wrong').chat!(chatRequest('svc:openai/gpt-4o-mini', 'hi')).catch((error) => error);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect(failure).toMatchObject({ status: 401, retryable: false });
  });

  it('429 and 503 are retryable, with Retry-After', async () => {
    await fault({ provider: 'openai', fault: { kind: 'status', status: 429, retryAfterSeconds: 4 }, times: 1 });
    await expect(adapter('openai').chat!(chatRequest('svc:openai/gpt-4o-mini', 'hi'))).rejects.toMatchObject({ status: 429, retryable: true, retryAfterSeconds: 4 });
    await fault({ provider: 'openai', fault: { kind: 'status', status: 503 }, times: 1 });
    await expect(adapter('openai').chat!(chatRequest('svc:openai/gpt-4o-mini', 'hi'))).rejects.toMatchObject({ status: 503, retryable: true });
  });

  it('a stream cut mid-way throws a retryable error instead of ending quietly', async () => {
    await fault({ provider: 'groq', fault: { kind: 'disconnect', afterChunks: 2 }, times: 1 });
    const failure = await collect(adapter('groq').chatStream!(chatRequest('svc:groq/llama-3.3-70b-versatile', 'a stream'))).catch((error) => error);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect(failure.retryable).toBe(true);
  });

  it('opens on the first frame, the role chunk, before any content (an error frame first opens nothing)', async () => {
    // One-route fake upstreams: the emulator always follows its role chunk with content.
    const frames = {
      '/cut': 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n',
      '/refused': 'data: {"error":{"message":"overloaded"}}\n\n',
    };
    const fake = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(frames[req.url!.replace('/chat/completions', '') as keyof typeof frames], () => res.destroy());
    });
    const fakeServer = await new Promise<Server>((resolve) => fake.listen(0, '127.0.0.1', () => resolve(fake)));
    try {
      for (const [path, opened] of [['/cut', [{ type: 'opened' }]], ['/refused', []]] as const) {
        const upstream = createOpenAiCompatibleAdapter('openai', { kind: 'key', baseUrl: `${serverUrl(fakeServer)}${path}`, apiKey: 'any' });
        const seen: ChatStreamEvent[] = [];
        const failure = await (async () => {
          for await (const event of upstream.chatStream!(chatRequest('svc:openai/gpt-4o-mini', 'hi'))) seen.push(event);
        })().catch((error) => error);
        expect(seen).toEqual(opened);
        expect(failure).toMatchObject({ provider: 'openai', retryable: true });
      }
    } finally {
      fakeServer.closeAllConnections();
      await new Promise((resolve) => fakeServer.close(resolve));
    }
  });

  it("the caller's abort stops the call and surfaces as the abort", async () => {
    await fault({ provider: 'openai', fault: { kind: 'timeout' }, times: 1 });
    const controller = new AbortController();
    const pending = adapter('openai').chat!(chatRequest('svc:openai/gpt-4o-mini', 'hi', { signal: controller.signal }));
    setTimeout(() => controller.abort(), 50);
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });
});
