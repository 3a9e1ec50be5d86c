import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { catalogModel, type CatalogModel } from '../shared/models/catalog.js';
import { createAnthropicAdapter } from '../shared/providers/anthropic.js';
import { createCohereAdapter } from '../shared/providers/cohere.js';
import { createGeminiAdapter } from '../shared/providers/gemini.js';
import { readServerSentEvents } from '../shared/providers/http.js';
import type { KeyProviderSettings } from '../shared/providers/settings.js';
import { UpstreamError, type ChatMessage, type ChatRequest, type ChatStreamEvent, type ProviderAdapter, type ToolCall } from '../shared/providers/types.js';
import { countTokens, deterministicEmbedding, deterministicReply, replyTokens, type EmulatorCredentials, type FaultRule } from '../shared/emulator/core.js';
import { createFullEmulator } from '../shared/emulator/emulator.js';

let server: http.Server;
let url: string;
let credentials: EmulatorCredentials;

beforeAll(async () => {
  const emulator = createFullEmulator();
  credentials = emulator.credentials;
  server = await listen(emulator.app, 0, '127.0.0.1');
  url = serverUrl(server);
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(async () => {
  await fetch(`${url}/_emulator/faults`, { method: 'DELETE' });
});

async function injectFault(rule: Omit<FaultRule, 'times'> & { times?: number }): Promise<void> {
  const response = await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ times: 1, ...rule }) });
  expect(response.status).toBe(204);
}

const settingsFor = (provider: string, apiKey = credentials.apiKeys[provider]!): KeyProviderSettings => ({ kind: 'key', baseUrl: `${url}/${provider}`, apiKey });

function model(id: string): CatalogModel {
  const found = catalogModel(id);
  if (!found) throw new Error(`${id} is not in the catalog`);
  return found;
}

async function collect(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const events: ChatStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** What a stream adds up to: its text, its tool calls assembled by index, and its tail. */
function assemble(events: ChatStreamEvent[]) {
  const deltas = events.filter((event) => event.type === 'delta');
  const calls: { id?: string; name?: string; arguments: string }[] = [];
  for (const delta of deltas) {
    for (const call of delta.toolCalls ?? []) {
      const entry = (calls[call.index] ??= { arguments: '' });
      if (call.id) entry.id = call.id;
      if (call.name) entry.name = call.name;
      entry.arguments += call.arguments ?? '';
    }
  }
  return { content: deltas.map((delta) => delta.content ?? '').join(''), calls, types: events.map((event) => event.type) };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'boolean' } }, required: ['city', 'celsius'], additionalProperties: false },
  },
};

const PERSON_SCHEMA = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' }, nickname: { type: ['string', 'null'] } },
  required: ['name', 'age', 'nickname'],
  additionalProperties: false,
};

interface Case {
  provider: 'anthropic' | 'gemini' | 'cohere';
  create: (settings: KeyProviderSettings) => ProviderAdapter;
  model: string;
  /** Prompt tokens the emulator reports for one system and one user message. */
  promptTokens: (system: string, user: string) => number;
  /** An injected overload status this provider really uses. */
  overloadStatus: number;
}

const CASES: Case[] = [
  {
    provider: 'anthropic',
    create: createAnthropicAdapter,
    model: 'svc:anthropic/claude-haiku-4-5-20251001',
    // Anthropic counts each block on its own.
    promptTokens: (system, user) => countTokens(system) + countTokens(user),
    overloadStatus: 529,
  },
  {
    provider: 'gemini',
    create: createGeminiAdapter,
    model: 'svc:gemini/gemini-2.0-flash',
    promptTokens: (system, user) => countTokens(`${system}\n${user}`),
    overloadStatus: 503,
  },
  {
    provider: 'cohere',
    create: createCohereAdapter,
    model: 'svc:cohere/command-r-plus',
    promptTokens: (system, user) => countTokens(`${system}\n${user}`),
    overloadStatus: 503,
  },
];

describe.each(CASES)('$provider adapter against the emulator', ({ provider, create, model: modelId, promptTokens, overloadStatus }) => {
  const adapter = () => create(settingsFor(provider));
  const catalog = () => model(modelId);
  const request = (messages: ChatMessage[], extra: Partial<ChatRequest> = {}): ChatRequest => ({
    model: catalog(),
    upstreamModel: catalog().model,
    region: undefined,
    messages,
    maxTokens: undefined,
    signal: new AbortController().signal,
    ...extra,
  });
  const SYSTEM = 'You are a terse assistant.';
  const USER = `Say something about ${provider} in a few words.`;
  const conversation = (): ChatMessage[] => [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: USER },
  ];

  it('answers a chat with the content and usage the emulator computes, the same every time', async () => {
    const expected = deterministicReply(catalog().model, `${SYSTEM}\n${USER}`);
    const first = await adapter().chat!(request(conversation()));
    expect(first).toEqual({
      content: expected.text,
      finishReason: 'stop',
      usage: expect.objectContaining({ inputTokens: promptTokens(SYSTEM, USER), outputTokens: replyTokens(expected.text) }),
    });
    const second = await adapter().chat!(request(conversation()));
    expect(second).toEqual(first);
  });

  it('streams the same content as the plain chat, ending with one finish and then one usage', async () => {
    const plain = await adapter().chat!(request(conversation()));
    const events = await collect(adapter().chatStream!(request(conversation())));
    const streamed = assemble(events);
    expect(streamed.content).toBe(plain.content);
    expect(streamed.types[0]).toBe('opened');
    expect(streamed.types.slice(1, -2).every((type) => type === 'delta')).toBe(true);
    expect(streamed.types.filter((type) => type === 'delta').length).toBeGreaterThan(1);
    expect(events.slice(-2)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: plain.usage },
    ]);
  });

  it('returns a tool call, and answers in text once the tool result comes back', async () => {
    const ask: ChatMessage = { role: 'user', content: 'EMULATOR_CALL_TOOL What is the weather in Paris?' };
    const called = await adapter().chat!(request([ask], { tools: [WEATHER_TOOL] }));
    expect(called.finishReason).toBe('tool_calls');
    expect(called.toolCalls).toHaveLength(1);
    const call = called.toolCalls![0]!;
    expect(call).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
    expect(call.id).toMatch(/\S/);
    expect(JSON.parse(call.function.arguments)).toEqual({ city: expect.any(String), celsius: expect.any(Boolean) });

    const answered = await adapter().chat!(
      request([ask, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}' }], { tools: [WEATHER_TOOL] }),
    );
    expect(answered.finishReason).toBe('stop');
    expect(answered.toolCalls).toBeUndefined();
    expect(answered.content).toMatch(/\w+/);
  });

  it('streams a tool call as deltas that assemble into the same call', async () => {
    const ask: ChatMessage = { role: 'user', content: 'EMULATOR_CALL_TOOL What is the weather in Oslo?' };
    const plain = await adapter().chat!(request([ask], { tools: [WEATHER_TOOL] }));
    const events = await collect(adapter().chatStream!(request([ask], { tools: [WEATHER_TOOL] })));
    const streamed = assemble(events);
    expect(streamed.calls).toHaveLength(1);
    expect(streamed.calls[0]).toMatchObject({ id: expect.stringMatching(/\S/), name: 'get_weather' });
    expect(JSON.parse(streamed.calls[0]!.arguments)).toEqual(JSON.parse(plain.toolCalls![0]!.function.arguments));
    expect(events.at(-2)).toEqual({ type: 'finish', finishReason: 'tool_calls' });
    expect(events.at(-1)?.type).toBe('usage');
  });

  it('stops at maxTokens with finish reason length, in a chat and in a stream', async () => {
    const result = await adapter().chat!(request(conversation(), { maxTokens: 3 }));
    expect(result.finishReason).toBe('length');
    expect(result.usage.outputTokens).toBe(3);
    expect(result.content!.split(' ')).toHaveLength(3);
    const events = await collect(adapter().chatStream!(request(conversation(), { maxTokens: 3 })));
    expect(assemble(events).content).toBe(result.content);
    expect(events.at(-2)).toEqual({ type: 'finish', finishReason: 'length' });
  });

  it('answers a json_schema request with JSON that has the schema’s properties', async () => {
    // The marker makes the emulated Claude use the forced JSON tool, as the real one always does;
    // Gemini and Cohere answer JSON mode without it.
    const result = await adapter().chat!(
      request([{ role: 'user', content: 'EMULATOR_CALL_TOOL Describe a person.' }], {
        responseFormat: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON_SCHEMA, strict: true } },
      }),
    );
    expect(result.finishReason).toBe('stop');
    expect(result.toolCalls).toBeUndefined();
    expect(JSON.parse(result.content!)).toEqual({ name: expect.any(String), age: expect.any(Number), nickname: expect.any(String) });
  });

  it('reports a wrong API key as a 401 that is not retried', async () => {
    const error = await caught(create(settingsFor(provider, 'not-the-key')).chat!(request(conversation())));
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, status: 401, retryable: false });
  });

  it('reports a 429 as retryable, with its Retry-After', async () => {
    await injectFault({ provider, fault: { kind: 'status', status: 429, retryAfterSeconds: 3 } });
    const error = await caught(adapter().chat!(request(conversation())));
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, status: 429, retryable: true, retryAfterSeconds: 3 });
  });

  it(`reports an overload (${overloadStatus}) as retryable, also when a stream is refused`, async () => {
    await injectFault({ provider, fault: { kind: 'status', status: overloadStatus }, times: 2 });
    const error = await caught(adapter().chat!(request(conversation())));
    expect(error).toMatchObject({ provider, status: overloadStatus, retryable: true });
    const streamError = await caught(collect(adapter().chatStream!(request(conversation()))));
    expect(streamError).toBeInstanceOf(UpstreamError);
    expect(streamError).toMatchObject({ status: overloadStatus, retryable: true });
  });

  it('turns a connection broken mid-stream into a retryable UpstreamError after the deltas that arrived', async () => {
    await injectFault({ provider, fault: { kind: 'disconnect', afterChunks: 2 } });
    const events: ChatStreamEvent[] = [];
    const error = await caught(
      (async () => {
        for await (const event of adapter().chatStream!(request(conversation()))) events.push(event);
      })(),
    );
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, status: undefined, retryable: true });
    expect(events.map((event) => event.type)).toEqual(['opened', 'delta', 'delta']);
  });

  it('stops a call that is waiting for an answer when its signal aborts', async () => {
    await injectFault({ provider, fault: { kind: 'timeout' } });
    const controller = new AbortController();
    const pending = adapter().chat!(request(conversation(), { signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    const error = await caught(pending);
    expect(error).not.toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ name: 'AbortError' });
  });

  it('stops a stream mid-way when its signal aborts', async () => {
    const controller = new AbortController();
    const seen: ChatStreamEvent[] = [];
    const error = await caught(
      (async () => {
        for await (const event of adapter().chatStream!(request(conversation(), { signal: controller.signal }))) {
          seen.push(event);
          if (seen.length === 1) controller.abort();
        }
      })(),
    );
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(seen.some((event) => event.type === 'finish')).toBe(false);
  });

  it('rejects an already-aborted signal without calling upstream', async () => {
    const controller = new AbortController();
    controller.abort();
    await injectFault({ provider, fault: { kind: 'status', status: 500 } });
    const error = await caught(adapter().chat!(request(conversation(), { signal: controller.signal })));
    expect(error).toMatchObject({ name: 'AbortError' });
    // The injected fault is still unused: the request never reached the emulator.
    const next = await caught(adapter().chat!(request(conversation())));
    expect(next).toMatchObject({ status: 500 });
  });
});

describe('anthropic specifics', () => {
  const claude = () => model('svc:anthropic/claude-haiku-4-5-20251001');
  const request = (messages: ChatMessage[], extra: Partial<ChatRequest> = {}): ChatRequest => ({
    model: claude(),
    upstreamModel: claude().model,
    region: undefined,
    messages,
    maxTokens: undefined,
    signal: new AbortController().signal,
    ...extra,
  });

  it('with promptCache auto, writes the prefix once and reads it on the next call, counting it in inputTokens', async () => {
    const system = `You answer questions about the handbook ${randomUUID()}. ${'The handbook says many things. '.repeat(200)}`;
    const messages: ChatMessage[] = [
      { role: 'system', content: system },
      { role: 'user', content: 'What does the handbook say?' },
    ];
    const adapter = createAnthropicAdapter(settingsFor('anthropic'));
    const first = await adapter.chat!(request(messages, { promptCache: 'auto' }));
    const second = await adapter.chat!(request(messages, { promptCache: 'auto' }));
    const total = countTokens(system) + countTokens('What does the handbook say?');
    // The automatic breakpoint sits at the end of the prompt: the whole prompt is the cached prefix.
    expect(first.usage).toMatchObject({ inputTokens: total, cacheWriteTokens: total, cacheReadTokens: 0 });
    expect(second.usage).toMatchObject({ inputTokens: total, cacheWriteTokens: 0, cacheReadTokens: total });

    const streamed = await collect(adapter.chatStream!(request(messages, { promptCache: 'auto' })));
    expect(streamed.at(-1)).toEqual({ type: 'usage', usage: second.usage });
  });

  it('without promptCache, caches nothing', async () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: `Uncached ${randomUUID()}` },
      { role: 'user', content: 'Hello' },
    ];
    const adapter = createAnthropicAdapter(settingsFor('anthropic'));
    await adapter.chat!(request(messages));
    const second = await adapter.chat!(request(messages));
    expect(second.usage).toMatchObject({ cacheReadTokens: 0, cacheWriteTokens: 0 });
  });

  it('maps tool_choice: none answers in text, a named function is the one called', async () => {
    const ask: ChatMessage = { role: 'user', content: 'EMULATOR_CALL_TOOL Weather or time?' };
    const timeTool = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } };
    const adapter = createAnthropicAdapter(settingsFor('anthropic'));
    const none = await adapter.chat!(request([ask], { tools: [WEATHER_TOOL, timeTool], toolChoice: 'none' }));
    expect(none).toMatchObject({ finishReason: 'stop', content: expect.stringMatching(/\w+/) });
    const named = await adapter.chat!(request([ask], { tools: [WEATHER_TOOL, timeTool], toolChoice: { type: 'function', function: { name: 'get_time' } } }));
    expect(named.toolCalls?.map((call) => call.function.name)).toEqual(['get_time']);
  });

  it('leaves out the automatic cache breakpoint when the caller already set the four Anthropic allows', async () => {
    const breakpoint = { type: 'ephemeral' as const };
    const messages: ChatMessage[] = [
      { role: 'system', content: `Rules ${randomUUID()}` },
      { role: 'user', content: 'one', cache_control: breakpoint },
      { role: 'assistant', content: 'two', cache_control: breakpoint },
      { role: 'user', content: 'three', cache_control: breakpoint },
      { role: 'assistant', content: 'four', cache_control: breakpoint },
      { role: 'user', content: 'five' },
    ];
    const result = await createAnthropicAdapter(settingsFor('anthropic')).chat!(request(messages, { promptCache: 'auto' }));
    expect(result.usage.cacheWriteTokens).toBeGreaterThan(0);
  });

  it('turns an error event in the middle of a stream into an UpstreamError with the status of its type', async () => {
    // The emulator cannot send a mid-stream error event, so a one-route fake upstream does.
    const { createServer } = await import('node:http');
    const fake = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}\n\n');
      res.write('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n');
      res.end('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n');
    });
    const fakeServer = await new Promise<http.Server>((resolve) => fake.listen(0, '127.0.0.1', () => resolve(fake)));
    try {
      const adapter = createAnthropicAdapter({ kind: 'key', baseUrl: serverUrl(fakeServer), apiKey: 'any' });
      const seen: ChatStreamEvent[] = [];
      const error = await caught(
        (async () => {
          for await (const event of adapter.chatStream!(request([{ role: 'user', content: 'Hello' }]))) seen.push(event);
        })(),
      );
      expect(error).toBeInstanceOf(UpstreamError);
      expect(error).toMatchObject({ status: 529, retryable: true, message: 'anthropic: Overloaded' });
      expect(seen).toEqual([{ type: 'opened' }, { type: 'delta', content: 'Hi' }]);
    } finally {
      fakeServer.closeAllConnections();
      await new Promise((resolve) => fakeServer.close(resolve));
    }
  });

  it('sends images, PDFs and several tool results in one turn in shapes Anthropic accepts', async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const calls: ToolCall[] = [
      { id: 'toolu_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","celsius":true}' } },
      { id: 'toolu_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","celsius":true}' } },
    ];
    const result = await createAnthropicAdapter(settingsFor('anthropic')).chat!(
      request(
        [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Compare these.' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
              { type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0xLjQK' } },
            ],
          },
          { role: 'assistant', content: '', tool_calls: calls },
          { role: 'tool', tool_call_id: 'toolu_a', content: '18' },
          { role: 'tool', tool_call_id: 'toolu_b', content: '4' },
        ],
        { tools: [WEATHER_TOOL], toolChoice: 'required' },
      ),
    );
    // A 400 from the emulator's schema (e.g. an empty text block or a `tool` role) would have thrown.
    expect(result.finishReason).toBe('stop');
    expect(result.content).toMatch(/\w+/);
  });
});

describe('embeddings', () => {
  it('gemini embeds a batch, shortened to the requested dimensions, with estimated usage', async () => {
    const embeddingModel = model('svc:gemini/text-embedding-004');
    const input = ['the first text', 'a second, longer text to embed', 'third'];
    const result = await createGeminiAdapter(settingsFor('gemini')).embeddings!({
      model: embeddingModel,
      upstreamModel: embeddingModel.model,
      input,
      dimensions: 256,
      signal: new AbortController().signal,
    });
    expect(result.embeddings).toHaveLength(3);
    expect(result.embeddings.every((vector) => vector.length === 256)).toBe(true);
    expect(result.embeddings[1]).toEqual(deterministicEmbedding(embeddingModel.model, input[1]!, 256));
    expect(result.usage.inputTokens).toBe(input.reduce((sum, text) => sum + Math.ceil(text.length / 4), 0));
  });

  it('gemini embeds at the native dimensions when none are requested', async () => {
    const embeddingModel = model('svc:gemini/text-embedding-004');
    const result = await createGeminiAdapter(settingsFor('gemini')).embeddings!({ model: embeddingModel, upstreamModel: embeddingModel.model, input: ['one'], signal: new AbortController().signal });
    expect(result.embeddings.map((vector) => vector.length)).toEqual([embeddingModel.dimensions]);
  });

  it('cohere embeds a batch with the billed input tokens', async () => {
    const embeddingModel = model('svc:cohere/embed-english-v3.0');
    const input = ['the first text', 'a second, longer text to embed'];
    const result = await createCohereAdapter(settingsFor('cohere')).embeddings!({ model: embeddingModel, upstreamModel: embeddingModel.model, input, signal: new AbortController().signal });
    expect(result.embeddings).toHaveLength(2);
    expect(result.embeddings.every((vector) => vector.length === embeddingModel.dimensions)).toBe(true);
    expect(result.embeddings[0]).toEqual(deterministicEmbedding(embeddingModel.model, input[0]!, embeddingModel.dimensions!));
    expect(result.usage.inputTokens).toBe(input.reduce((sum, text) => sum + countTokens(text), 0));
  });

  it('an embeddings error is an UpstreamError too', async () => {
    const embeddingModel = model('svc:cohere/embed-english-v3.0');
    await injectFault({ provider: 'cohere', fault: { kind: 'status', status: 429, retryAfterSeconds: 3 } });
    const error = await caught(createCohereAdapter(settingsFor('cohere')).embeddings!({ model: embeddingModel, upstreamModel: embeddingModel.model, input: ['x'], signal: new AbortController().signal }));
    expect(error).toMatchObject({ provider: 'cohere', status: 429, retryable: true, retryAfterSeconds: 3 });
  });
});

describe('readServerSentEvents', () => {
  const bodyOf = (...chunks: string[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
        controller.close();
      },
    });

  it('reads named events, multi-line data, comments, CRLF split across chunks and a final event without a blank line', async () => {
    const events = [];
    for await (const event of readServerSentEvents(bodyOf(': comment\n', 'event: one\ndata: a\r', '\ndata: b\r\n\r\n', 'data: {"x":1}\n\nevent: ignored-without-data\n\n', 'data: last'))) {
      events.push(event);
    }
    expect(events).toEqual([
      { event: 'one', data: 'a\nb' },
      { event: undefined, data: '{"x":1}' },
      { event: undefined, data: 'last' },
    ]);
  });
});
