import type http from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { countTokens, createEmulatorCredentials, deterministicEmbedding, deterministicReply, relevance, replyTokens, type EmulatorCredentials, type FaultRule } from '../shared/emulator/core.js';
import { createEmulatorApp } from '../shared/emulator/server.js';
import { nativeStyles } from '../shared/emulator/styles/native.js';

const CLAUDE = 'claude-haiku-4-5-20251001';
const GEMINI = 'gemini-2.0-flash';
const COMMAND = 'command-r-plus';

let server: http.Server;
let url: string;
let credentials: EmulatorCredentials;

beforeAll(async () => {
  credentials = createEmulatorCredentials(['anthropic', 'gemini', 'cohere']);
  const { app } = createEmulatorApp({ credentials, latencyMs: 0, chunkIntervalMs: 0 }, nativeStyles);
  server = await listen(app, 0, '127.0.0.1');
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
  const response = await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(rule) });
  expect(response.status).toBe(204);
}

const anthropic = (options: { apiKey?: string; maxRetries?: number } = {}) =>
  new Anthropic({ apiKey: options.apiKey ?? credentials.apiKeys.anthropic, baseURL: `${url}/anthropic`, maxRetries: options.maxRetries ?? 0 });

/** The emulator's answers are checked field by field, so their JSON is read untyped. */
type EmulatorResponse = Omit<Response, 'json'> & { json(): Promise<any> };

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<EmulatorResponse> {
  return fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

const gemini = (path: string, body: unknown) => post(`/gemini/v1beta/models/${path}`, body, { 'x-goog-api-key': credentials.apiKeys.gemini! });
const cohere = (path: string, body: unknown) => post(`/cohere/v2/${path}`, body, { authorization: `Bearer ${credentials.apiKeys.cohere}` });

/** Server-sent events as sent: the `event:` name (if any) and the parsed `data:` payload. */
function parseEvents(text: string): { event?: string; data: any }[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split(/\r?\n/);
      const event = lines.find((line) => line.startsWith('event: '))?.slice('event: '.length);
      const data = lines.find((line) => line.startsWith('data: '))!.slice('data: '.length);
      return { ...(event ? { event } : {}), data: data === '[DONE]' ? data : JSON.parse(data) };
    });
}

/** Reads a body until it ends or the connection breaks; returns what arrived and whether it broke. */
async function readUntilClosed(response: EmulatorResponse): Promise<{ text: string; broken: boolean }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { text, broken: false };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, broken: true };
  }
}

describe('anthropic Messages API, through the official SDK', () => {
  it('answers a message with the deterministic reply and its usage', async () => {
    const message = await anthropic().messages.create({ model: CLAUDE, max_tokens: 256, system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] });
    const expected = deterministicReply(CLAUDE, 'Be brief.\nSay hello', 256).text;
    expect(message.id).toMatch(/^msg_/);
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: CLAUDE, stop_reason: 'end_turn', stop_sequence: null });
    expect(message.content).toEqual([{ type: 'text', text: expected }]);
    expect(message.usage).toMatchObject({
      input_tokens: countTokens('Be brief.') + countTokens('Say hello'),
      output_tokens: replyTokens(expected),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    });
  });

  it('stops at max_tokens with stop_reason max_tokens', async () => {
    const message = await anthropic().messages.create({ model: CLAUDE, max_tokens: 2, messages: [{ role: 'user', content: 'Say a lot' }] });
    expect(message.stop_reason).toBe('max_tokens');
    expect(message.usage.output_tokens).toBe(2);
    expect(message.content[0]).toEqual({ type: 'text', text: deterministicReply(CLAUDE, 'Say a lot', 2).text });
  });

  it('streams the same reply, event by event, to a final message with usage', async () => {
    const stream = anthropic().messages.stream({ model: CLAUDE, max_tokens: 256, messages: [{ role: 'user', content: 'Stream to me' }] });
    const pieces: string[] = [];
    stream.on('text', (text) => pieces.push(text));
    const final = await stream.finalMessage();
    const expected = deterministicReply(CLAUDE, 'Stream to me', 256).text;
    expect(pieces.length).toBe(replyTokens(expected));
    expect(pieces.join('')).toBe(expected);
    expect(final.content).toEqual([{ type: 'text', text: expected }]);
    expect(final.stop_reason).toBe('end_turn');
    expect(final.usage).toMatchObject({ input_tokens: countTokens('Stream to me'), output_tokens: replyTokens(expected) });
  });

  it('sends the named events in Anthropic order, each event name matching its data type', async () => {
    const response = await post(
      '/anthropic/v1/messages',
      { model: CLAUDE, max_tokens: 3, stream: true, messages: [{ role: 'user', content: 'Name the events' }] },
      { 'x-api-key': credentials.apiKeys.anthropic!, 'anthropic-version': '2023-06-01' },
    );
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const events = parseEvents(await response.text());
    for (const { event, data } of events) expect(data.type).toBe(event);
    expect(events.map(({ event }) => event)).toEqual([
      'message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
    ]);
    expect(events[0]!.data.message.usage.input_tokens).toBe(countTokens('Name the events'));
    expect(events[3]!.data.delta.type).toBe('text_delta');
    expect(events[7]!.data).toMatchObject({ delta: { stop_reason: 'max_tokens' }, usage: { output_tokens: 3 } });
  });

  it('writes a cacheable prefix once and reads it on the next identical prefix', async () => {
    const system = `You are the emulator's cache test. ${'Context that stays the same. '.repeat(40)}`;
    const ask = (question: string, systemText = system) =>
      anthropic().messages.create({
        model: CLAUDE,
        max_tokens: 64,
        system: [{ type: 'text', text: systemText, cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: question }],
      });
    const prefix = countTokens(system);

    const first = await ask('First question');
    expect(first.usage).toMatchObject({ cache_creation_input_tokens: prefix, cache_read_input_tokens: 0, input_tokens: countTokens('First question') });

    const second = await ask('First question');
    expect(second.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: prefix, input_tokens: countTokens('First question') });

    const otherQuestion = await ask('Another question after the cached prefix');
    expect(otherQuestion.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: prefix });

    const otherPrefix = await ask('First question', `${system} Changed.`);
    expect(otherPrefix.usage).toMatchObject({ cache_creation_input_tokens: countTokens(`${system} Changed.`), cache_read_input_tokens: 0 });
  });

  it('reports cache reads in a stream too', async () => {
    const request = {
      model: CLAUDE,
      max_tokens: 16,
      system: [{ type: 'text' as const, text: 'A streamed cacheable system prompt. '.repeat(30), cache_control: { type: 'ephemeral' as const, ttl: '1h' as const } }],
      messages: [{ role: 'user' as const, content: 'Hi' }],
    };
    await anthropic().messages.create(request);
    const final = await anthropic().messages.stream(request).finalMessage();
    expect(final.usage.cache_read_input_tokens).toBe(countTokens(request.system[0]!.text));
    expect(final.usage.cache_creation_input_tokens).toBe(0);
  });

  it('calls a tool when the prompt asks for it, and answers in text once the result is back', async () => {
    const tools = [
      {
        name: 'get_weather',
        description: 'Weather for a city',
        input_schema: { type: 'object' as const, properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
      },
    ];
    const question = { role: 'user' as const, content: 'EMULATOR_CALL_TOOL What is the weather in Paris?' };
    const call = await anthropic().messages.create({ model: CLAUDE, max_tokens: 256, tools, messages: [question] });
    expect(call.stop_reason).toBe('tool_use');
    const block = call.content[0]!;
    expect(block.type).toBe('tool_use');
    if (block.type !== 'tool_use') return;
    expect(block.id).toMatch(/^toolu_/);
    expect(block.name).toBe('get_weather');
    expect(typeof (block.input as { city: unknown }).city).toBe('string');
    expect(Number.isInteger((block.input as { days: unknown }).days)).toBe(true);

    const answer = await anthropic().messages.create({
      model: CLAUDE,
      max_tokens: 256,
      tools,
      messages: [question, { role: 'assistant', content: call.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: block.id, content: 'Sunny, 21 C' }] }],
    });
    expect(answer.stop_reason).toBe('end_turn');
    expect(answer.content[0]!.type).toBe('text');
  });

  it('streams a tool call as input_json_delta', async () => {
    const final = await anthropic()
      .messages.stream({
        model: CLAUDE,
        max_tokens: 256,
        tools: [{ name: 'lookup', input_schema: { type: 'object', properties: { query: { type: 'string' } } } }],
        messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL look it up' }],
      })
      .finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    expect(final.content[0]).toMatchObject({ type: 'tool_use', name: 'lookup', input: { query: expect.any(String) } });
  });

  it('rejects a wrong key with 401 authentication_error', async () => {
    const error = await anthropic({ apiKey: 'sk-ant-wrong' })
      .messages.create({ model: CLAUDE, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(401);
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toEqual({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
  });

  it('requires anthropic-version, and knows only the catalog models', async () => {
    const noVersion = await post('/anthropic/v1/messages', { model: CLAUDE, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }, { 'x-api-key': credentials.apiKeys.anthropic! });
    expect(noVersion.status).toBe(400);
    expect((await noVersion.json()).error.type).toBe('invalid_request_error');

    const unknown = await anthropic()
      .messages.create({ model: 'claude-unknown-1', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((caught: unknown) => caught);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect((unknown as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ error: { type: 'not_found_error' } });
  });
});

describe('gemini generateContent, streamGenerateContent and embeddings', () => {
  const request = { systemInstruction: { parts: [{ text: 'Answer briefly.' }] }, contents: [{ role: 'user', parts: [{ text: 'What is a gateway?' }] }] };
  const expected = deterministicReply(GEMINI, 'Answer briefly.\nWhat is a gateway?').text;

  it('answers generateContent in Gemini shape, with the key in the header or the query', async () => {
    const response = await gemini(`${GEMINI}:generateContent`, request);
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body.candidates).toEqual([{ content: { role: 'model', parts: [{ text: expected }] }, finishReason: 'STOP', index: 0 }]);
    const promptTokens = countTokens('Answer briefly.\nWhat is a gateway?');
    expect(body.usageMetadata).toEqual({ promptTokenCount: promptTokens, candidatesTokenCount: replyTokens(expected), totalTokenCount: promptTokens + replyTokens(expected) });
    expect(body.modelVersion).toBe(GEMINI);

    const byQuery = await post(`/gemini/v1beta/models/${GEMINI}:generateContent?key=${credentials.apiKeys.gemini}`, request);
    expect((await byQuery.json()).candidates[0].content.parts[0].text).toBe(expected);
  });

  it('reports MAX_TOKENS when maxOutputTokens cuts the reply', async () => {
    const body = await (await gemini(`${GEMINI}:generateContent`, { ...request, generationConfig: { maxOutputTokens: 3 } })).json();
    expect(body.candidates[0].finishReason).toBe('MAX_TOKENS');
    expect(body.usageMetadata.candidatesTokenCount).toBe(3);
  });

  it('answers JSON matching responseSchema in JSON mode', async () => {
    const body = await (
      await gemini(`${GEMINI}:generateContent`, {
        contents: [{ parts: [{ text: 'A city as JSON' }] }],
        generationConfig: { responseMimeType: 'application/json', responseSchema: { type: 'OBJECT', properties: { name: { type: 'STRING' }, population: { type: 'INTEGER' } } } },
      })
    ).json();
    const city = JSON.parse(body.candidates[0].content.parts[0].text);
    expect(typeof city.name).toBe('string');
    expect(Number.isInteger(city.population)).toBe(true);
  });

  it('answers a functionCall when the prompt asks for a tool', async () => {
    const body = await (
      await gemini(`${GEMINI}:generateContent`, {
        contents: [{ role: 'user', parts: [{ text: 'EMULATOR_CALL_TOOL find flights' }] }],
        tools: [{ functionDeclarations: [{ name: 'find_flights', parameters: { type: 'OBJECT', properties: { from: { type: 'STRING' }, stops: { type: 'INTEGER' } } } }] }],
      })
    ).json();
    const call = body.candidates[0].content.parts[0].functionCall;
    expect(call.name).toBe('find_flights');
    expect(typeof call.args.from).toBe('string');
    expect(Number.isInteger(call.args.stops)).toBe(true);
  });

  it('streams with ?alt=sse as data: chunks that add up to the same reply', async () => {
    const response = await post(`/gemini/v1beta/models/${GEMINI}:streamGenerateContent?alt=sse`, request, { 'x-goog-api-key': credentials.apiKeys.gemini! });
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const chunks = parseEvents(await response.text()).map(({ data }) => data);
    expect(chunks.length).toBe(replyTokens(expected));
    expect(chunks.map((chunk) => chunk.candidates[0].content.parts[0].text).join('')).toBe(expected);
    const last = chunks.at(-1);
    expect(last.candidates[0].finishReason).toBe('STOP');
    expect(last.usageMetadata.candidatesTokenCount).toBe(replyTokens(expected));
  });

  it('streams a JSON array without alt=sse', async () => {
    const response = await gemini(`${GEMINI}:streamGenerateContent`, request);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const chunks = (await response.json()) as { candidates: { content: { parts: { text: string }[] } }[] }[];
    expect(chunks.map((chunk) => chunk.candidates[0]!.content.parts[0]!.text).join('')).toBe(expected);
  });

  it('embeds with text-embedding-004: 768 unit-length dimensions, outputDimensionality honoured, batches alike', async () => {
    const single = await (await gemini('text-embedding-004:embedContent', { model: 'models/text-embedding-004', content: { parts: [{ text: 'hello world' }] } })).json();
    expect(single.embedding.values).toHaveLength(768);
    expect(single.embedding.values).toEqual(deterministicEmbedding('text-embedding-004', 'hello world', 768));

    const short = await (await gemini('text-embedding-004:embedContent', { content: { parts: [{ text: 'hello world' }] }, outputDimensionality: 256 })).json();
    expect(short.embedding.values).toHaveLength(256);

    const batch = await (
      await gemini('text-embedding-004:batchEmbedContents', {
        requests: [
          { model: 'models/text-embedding-004', content: { parts: [{ text: 'hello world' }] } },
          { model: 'models/text-embedding-004', content: { parts: [{ text: 'another text' }] }, outputDimensionality: 64 },
        ],
      })
    ).json();
    expect(batch.embeddings).toHaveLength(2);
    expect(batch.embeddings[0].values).toEqual(single.embedding.values);
    expect(batch.embeddings[1].values).toHaveLength(64);
  });

  it("answers Google's errors: wrong key, no key, unknown model", async () => {
    const wrong = await post(`/gemini/v1beta/models/${GEMINI}:generateContent?key=wrong`, request);
    expect(wrong.status).toBe(400);
    expect((await wrong.json()).error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT', details: [{ reason: 'API_KEY_INVALID' }] });

    const missing = await post(`/gemini/v1beta/models/${GEMINI}:generateContent`, request);
    expect(missing.status).toBe(403);
    expect((await missing.json()).error.status).toBe('PERMISSION_DENIED');

    const unknown = await gemini('gemini-0.1-nonexistent:generateContent', request);
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
  });
});

describe('cohere v2 chat, embed and rerank', () => {
  const messages = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Tell me about rerankers' },
  ];
  const expected = deterministicReply(COMMAND, 'You are terse.\nTell me about rerankers').text;

  it('answers chat in v2 shape with billed and counted usage', async () => {
    const response = await cohere('chat', { model: COMMAND, messages });
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body.id).toEqual(expect.any(String));
    expect(body.finish_reason).toBe('COMPLETE');
    expect(body.message).toEqual({ role: 'assistant', content: [{ type: 'text', text: expected }] });
    const usage = { input_tokens: countTokens('You are terse.\nTell me about rerankers'), output_tokens: replyTokens(expected) };
    expect(body.usage).toEqual({ billed_units: usage, tokens: usage });
  });

  it('streams chat as message-start, content-start, content-delta…, content-end, message-end', async () => {
    const response = await cohere('chat', { model: COMMAND, messages, stream: true, max_tokens: 4 });
    const events = parseEvents(await response.text());
    const named = events.filter((event) => event.event);
    for (const { event, data } of named) expect(data.type).toBe(event);
    expect(named.map(({ event }) => event)).toEqual(['message-start', 'content-start', 'content-delta', 'content-delta', 'content-delta', 'content-delta', 'content-end', 'message-end']);
    const text = named.filter(({ event }) => event === 'content-delta').map(({ data }) => data.delta.message.content.text).join('');
    expect(text).toBe(deterministicReply(COMMAND, 'You are terse.\nTell me about rerankers', 4).text);
    expect(named.at(-1)!.data.delta).toMatchObject({ finish_reason: 'MAX_TOKENS', usage: { billed_units: { output_tokens: 4 } } });
  });

  it('answers a tool call with finish_reason TOOL_CALL when the prompt asks for one', async () => {
    const tools = [{ type: 'function', function: { name: 'search_docs', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } }];
    const body = await (await cohere('chat', { model: COMMAND, tools, messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL search the docs' }] })).json();
    expect(body.finish_reason).toBe('TOOL_CALL');
    expect(body.message.tool_calls).toHaveLength(1);
    expect(body.message.tool_calls[0]).toMatchObject({ type: 'function', function: { name: 'search_docs' } });
    expect(typeof JSON.parse(body.message.tool_calls[0].function.arguments).query).toBe('string');
  });

  it('embeds texts as 1024-dimension floats, requiring input_type', async () => {
    const response = await cohere('embed', { model: 'embed-english-v3.0', texts: ['first text', 'second text'], input_type: 'search_document', embedding_types: ['float', 'int8'] });
    const body = await response.json();
    expect(body.texts).toEqual(['first text', 'second text']);
    expect(body.embeddings.float).toHaveLength(2);
    expect(body.embeddings.float[0]).toHaveLength(1024);
    expect(body.embeddings.int8[0]).toHaveLength(1024);
    expect(body.embeddings.float[0]).not.toEqual(body.embeddings.float[1]);
    expect(body.meta.billed_units.input_tokens).toBe(countTokens('first text') + countTokens('second text'));

    const noInputType = await cohere('embed', { model: 'embed-english-v3.0', texts: ['x'] });
    expect(noInputType.status).toBe(400);
    expect(await noInputType.json()).toEqual({ message: expect.stringContaining('input_type') });
  });

  it('reranks by relevance, highest first, honouring top_n', async () => {
    const documents = ['Bananas are yellow fruit.', 'Rerank models order documents by relevance.', 'A gateway routes model requests.', 'Relevance of rerank models'];
    const query = 'rerank models relevance';
    const body = await (await cohere('rerank', { model: 'rerank-v3.5', query, documents, top_n: 2 })).json();
    const scores = documents.map((document, index) => ({ index, relevance_score: relevance(query, document) })).sort((a, b) => b.relevance_score - a.relevance_score);
    expect(body.results).toEqual(scores.slice(0, 2));
    expect(body.results[0].index).toBe(3);
    expect(body.results[0].relevance_score).toBeGreaterThan(body.results[1].relevance_score);
    expect(body.meta.billed_units).toEqual({ search_units: 1 });
  });

  it('rejects a wrong key with 401 and a bare message', async () => {
    const response = await post('/cohere/v2/chat', { model: COMMAND, messages }, { authorization: 'Bearer wrong' });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ message: 'invalid api token' });
  });
});

describe('injected faults', () => {
  it('answers 429 rate_limit_error with retry-after', async () => {
    await injectFault({ provider: 'anthropic', fault: { kind: 'status', status: 429, retryAfterSeconds: 7 } });
    const error = (await anthropic()
      .messages.create({ model: CLAUDE, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((caught: unknown) => caught)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).toBeInstanceOf(Anthropic.RateLimitError);
    expect(error.headers?.get('retry-after')).toBe('7');
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  });

  it('answers 529 overloaded_error, which the SDK retries after retry-after', async () => {
    await injectFault({ provider: 'anthropic', model: CLAUDE, fault: { kind: 'status', status: 529, retryAfterSeconds: 0 } });
    const error = (await anthropic()
      .messages.create({ model: CLAUDE, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] })
      .catch((caught: unknown) => caught)) as InstanceType<typeof Anthropic.APIError>;
    expect(error.status).toBe(529);
    expect(error.error).toMatchObject({ error: { type: 'overloaded_error' } });

    await injectFault({ provider: 'anthropic', model: CLAUDE, fault: { kind: 'status', status: 529, retryAfterSeconds: 0 } });
    const retried = await anthropic({ maxRetries: 1 }).messages.create({ model: CLAUDE, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] });
    expect(retried.content[0]).toEqual({ type: 'text', text: deterministicReply(CLAUDE, 'Hi', 8).text });
  });

  it("uses each provider's error shape for 429 and 500", async () => {
    await injectFault({ provider: 'gemini', fault: { kind: 'status', status: 429, retryAfterSeconds: 3 } });
    const limited = await gemini(`${GEMINI}:generateContent`, { contents: [{ parts: [{ text: 'Hi' }] }] });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('3');
    expect((await limited.json()).error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });

    await injectFault({ provider: 'cohere', fault: { kind: 'status', status: 500 } });
    const failed = await cohere('chat', { model: COMMAND, messages: [{ role: 'user', content: 'Hi' }] });
    expect(failed.status).toBe(500);
    expect(Object.keys(await failed.json())).toEqual(['message']);
  });

  it('breaks an Anthropic stream after two deltas', async () => {
    await injectFault({ provider: 'anthropic', fault: { kind: 'disconnect', afterChunks: 2 } });
    const stream = anthropic().messages.stream({ model: CLAUDE, max_tokens: 256, messages: [{ role: 'user', content: 'A long answer please' }] });
    const pieces: string[] = [];
    stream.on('text', (text) => pieces.push(text));
    stream.on('error', () => undefined);
    await expect(stream.finalMessage()).rejects.toThrow();
    expect(pieces).toEqual(deterministicReply(CLAUDE, 'A long answer please', 256).text.split(' ').slice(0, 2).map((word, i) => (i === 0 ? word : ` ${word}`)));
  });

  it('breaks Gemini and Cohere streams after two deltas', async () => {
    await injectFault({ provider: 'gemini', fault: { kind: 'disconnect', afterChunks: 2 } });
    const geminiStream = await readUntilClosed(await post(`/gemini/v1beta/models/${GEMINI}:streamGenerateContent?alt=sse`, { contents: [{ parts: [{ text: 'Hi' }] }] }, { 'x-goog-api-key': credentials.apiKeys.gemini! }));
    expect(geminiStream.broken).toBe(true);
    expect(parseEvents(geminiStream.text)).toHaveLength(2);

    await injectFault({ provider: 'cohere', fault: { kind: 'disconnect', afterChunks: 2 } });
    const cohereStream = await readUntilClosed(await cohere('chat', { model: COMMAND, stream: true, messages: [{ role: 'user', content: 'Hi' }] }));
    expect(cohereStream.broken).toBe(true);
    expect(parseEvents(cohereStream.text).filter(({ event }) => event === 'content-delta')).toHaveLength(2);
    expect(cohereStream.text).not.toContain('message-end');
  });
});

describe('determinism', () => {
  it('gives the same answer to the same prompt and a different one to a different prompt', async () => {
    const ask = (content: string) => anthropic().messages.create({ model: CLAUDE, max_tokens: 64, messages: [{ role: 'user', content }] });
    const [first, again, other] = await Promise.all([ask('Same prompt'), ask('Same prompt'), ask('Other prompt')]);
    expect(again.content).toEqual(first.content);
    expect(other.content).not.toEqual(first.content);

    const geminiAsk = async () => (await (await gemini(`${GEMINI}:generateContent`, { contents: [{ parts: [{ text: 'Same prompt' }] }] })).json()).candidates[0].content;
    expect(await geminiAsk()).toEqual(await geminiAsk());

    const cohereAsk = async () => (await (await cohere('chat', { model: COMMAND, messages: [{ role: 'user', content: 'Same prompt' }] })).json()).message;
    expect(await cohereAsk()).toEqual(await cohereAsk());

    const embed = async () => (await (await cohere('embed', { model: 'embed-multilingual-v3.0', texts: ['same'], input_type: 'search_query' })).json()).embeddings.float[0];
    expect(await embed()).toEqual(await embed());
  });
});
