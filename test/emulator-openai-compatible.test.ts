import type http from 'node:http';
import OpenAI, { APIConnectionTimeoutError, AuthenticationError, BadRequestError, NotFoundError, RateLimitError, toFile } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { createEmulatorCredentials, type EmulatorCredentials, type FaultRule } from '../shared/emulator/core.js';
import { createEmulatorApp } from '../shared/emulator/server.js';
import { openAiCompatibleStyle } from '../shared/emulator/styles/openai-compatible.js';

const PROVIDERS = ['openai', 'groq', 'together', 'fireworks', 'deepseek', 'mistral', 'xai', 'perplexity', 'openrouter', 'cerebras', 'deepinfra', 'voyage'];

let server: http.Server;
let url: string;
let credentials: EmulatorCredentials;
let openai: OpenAI;
let groq: OpenAI;

beforeAll(async () => {
  credentials = createEmulatorCredentials(PROVIDERS);
  const { app } = createEmulatorApp({ credentials, latencyMs: 0, chunkIntervalMs: 0 }, [openAiCompatibleStyle]);
  server = await listen(app, 0, '127.0.0.1');
  url = serverUrl(server);
  openai = client('openai', '/openai/v1');
  groq = client('groq', '/groq/openai/v1');
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(async () => {
  await fetch(`${url}/_emulator/faults`, { method: 'DELETE' });
});

function client(provider: string, basePath: string, options: { apiKey?: string; timeout?: number } = {}): OpenAI {
  return new OpenAI({ apiKey: options.apiKey ?? credentials.apiKeys[provider], baseURL: `${url}${basePath}`, maxRetries: 0, timeout: options.timeout });
}

async function injectFault(rule: Partial<FaultRule> & Pick<FaultRule, 'fault'>): Promise<void> {
  const response = await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(rule) });
  expect(response.status).toBe(204);
}

// Raw wire bodies, checked field by field.
async function post(path: string, provider: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${credentials.apiKeys[provider]}` },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('chat completions', () => {
  it('answers in the OpenAI chat.completion shape with consistent usage', async () => {
    const completion = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] });
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('gpt-4o-mini');
    expect(completion.system_fingerprint).toMatch(/^fp_/);
    const [choice] = completion.choices;
    expect(choice).toMatchObject({ index: 0, logprobs: null, finish_reason: 'stop', message: { role: 'assistant', refusal: null } });
    expect(choice!.message.content!.split(' ').length).toBe(completion.usage!.completion_tokens);
    expect(completion.usage!.prompt_tokens).toBe(Math.ceil('Say hello'.length / 4));
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
  });

  it('serves other providers under their own base path and honours max_tokens', async () => {
    const completion = await groq.chat.completions.create({ model: 'llama-3.3-70b-versatile', messages: [{ role: 'user', content: 'Tell me a long story' }], max_tokens: 3 });
    expect(completion.choices[0]!.finish_reason).toBe('length');
    expect(completion.usage!.completion_tokens).toBe(3);
    expect(completion.choices[0]!.message.content!.split(' ')).toHaveLength(3);
  });

  it('is deterministic: the same request gets the same content', async () => {
    const request = { model: 'gpt-4o', messages: [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'What is the gateway?' }] };
    const first = await openai.chat.completions.create(request);
    const second = await openai.chat.completions.create(request);
    const other = await openai.chat.completions.create({ ...request, model: 'gpt-4.1' });
    expect(second.choices[0]!.message.content).toBe(first.choices[0]!.message.content);
    expect(other.choices[0]!.message.content).not.toBe(first.choices[0]!.message.content);
  });

  it('counts text parts and charges a fixed 85 tokens per image part', async () => {
    const completion = await openai.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }],
    });
    expect(completion.usage!.prompt_tokens).toBe(Math.ceil('What is this?'.length / 4) + 85);
  });

  it('calls the first tool when the prompt asks for it, and answers in text after the tool result', async () => {
    const tools = [{ type: 'function' as const, function: { name: 'lookup_weather', parameters: { type: 'object', properties: {} } } }];
    const called = await openai.chat.completions.create({ model: 'gpt-4o', tools, messages: [{ role: 'user', content: 'EMULATOR_CALL_TOOL please' }] });
    const toolCall = called.choices[0]!.message.tool_calls![0]!;
    expect(called.choices[0]!.finish_reason).toBe('tool_calls');
    expect(toolCall).toMatchObject({ type: 'function', function: { name: 'lookup_weather', arguments: '{}' } });

    const after = await openai.chat.completions.create({
      model: 'gpt-4o',
      tools,
      messages: [
        { role: 'user', content: 'EMULATOR_CALL_TOOL please' },
        { role: 'assistant', content: null, tool_calls: [toolCall] },
        { role: 'tool', tool_call_id: toolCall.id, content: 'sunny' },
      ],
    });
    expect(after.choices[0]!.finish_reason).toBe('stop');
    expect(after.choices[0]!.message.content).toEqual(expect.any(String));
  });

  it('answers json_schema requests with conforming JSON, and breaks the schema on request', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' }, active: { type: 'boolean' } }, required: ['name', 'age', 'active'], additionalProperties: false };
    const response_format = { type: 'json_schema' as const, json_schema: { name: 'person', strict: true, schema } };
    const valid = await openai.chat.completions.create({ model: 'gpt-4o', response_format, messages: [{ role: 'user', content: 'Describe a person' }] });
    const value = JSON.parse(valid.choices[0]!.message.content!);
    expect(value).toEqual({ name: expect.any(String), age: expect.any(Number), active: expect.any(Boolean) });
    expect(Number.isInteger(value.age)).toBe(true);

    const broken = await openai.chat.completions.create({ model: 'gpt-4o', response_format, messages: [{ role: 'user', content: 'Describe a person EMULATOR_BREAK_SCHEMA' }] });
    const brokenValue = JSON.parse(broken.choices[0]!.message.content!);
    expect(Object.keys(brokenValue)).not.toContain('name');
  });
});

describe('streaming chat completions', () => {
  it('streams chunks the SDK parses to the end, with the usage chunk last, matching the unstreamed answer', async () => {
    const request = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Stream something' }] };
    const stream = await openai.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);

    expect(chunks[0]!.object).toBe('chat.completion.chunk');
    expect(chunks[0]!.choices[0]!.delta).toMatchObject({ role: 'assistant', content: '' });
    const finish = chunks.at(-2)!;
    expect(finish.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    const usageChunk = chunks.at(-1)!;
    expect(usageChunk.choices).toEqual([]);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    expect(usageChunk.usage!.completion_tokens).toBe(text.split(' ').length);
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);

    const unstreamed = await openai.chat.completions.create(request);
    expect(text).toBe(unstreamed.choices[0]!.message.content);
  });

  it('sends no usage chunk unless include_usage is set', async () => {
    const stream = await groq.chat.completions.create({ model: 'llama-3.3-70b-versatile', messages: [{ role: 'user', content: 'Hi' }], stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.every((chunk) => chunk.usage === undefined)).toBe(true);
  });
});

describe('embeddings', () => {
  it('decodes the SDK default base64 to the same unit vector as the float format', async () => {
    const decoded = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['first text', 'second text'] });
    const floats = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['first text', 'second text'], encoding_format: 'float' });
    expect(decoded.object).toBe('list');
    expect(decoded.data.map((item) => item.index)).toEqual([0, 1]);
    expect(decoded.data[0]!.embedding).toHaveLength(1536);
    const norm = Math.sqrt(floats.data[0]!.embedding.reduce((sum, value) => sum + value * value, 0));
    expect(norm).toBeCloseTo(1, 6);
    decoded.data[0]!.embedding.forEach((value, i) => expect(value).toBeCloseTo(floats.data[0]!.embedding[i]!, 6));
    expect(decoded.data[0]!.embedding).not.toEqual(decoded.data[1]!.embedding);
    expect(floats.usage).toEqual({ prompt_tokens: 6, total_tokens: 6 });
  });

  it('shortens only shortenable models and rejects dimensions on the others with 400', async () => {
    const short = await openai.embeddings.create({ model: 'text-embedding-3-large', input: 'shorten me', dimensions: 256, encoding_format: 'float' });
    expect(short.data[0]!.embedding).toHaveLength(256);
    const error = await openai.embeddings.create({ model: 'text-embedding-ada-002', input: 'shorten me', dimensions: 256 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(BadRequestError);
    expect((error as BadRequestError).error).toMatchObject({ type: 'invalid_request_error', message: 'This model does not support specifying dimensions.' });
  });

  it('answers Voyage embeddings with usage total_tokens only, and input_type changes the vector', async () => {
    const query = await post('/voyage/v1/embeddings', 'voyage', { model: 'voyage-3-lite', input: ['find this'], input_type: 'query' });
    const plain = await post('/voyage/v1/embeddings', 'voyage', { model: 'voyage-3-lite', input: ['find this'] });
    expect(query.status).toBe(200);
    expect(query.body.usage).toEqual({ total_tokens: 3 });
    expect(query.body.data[0].embedding).toHaveLength(512);
    expect(query.body.data[0].embedding).not.toEqual(plain.body.data[0].embedding);
  });
});

describe('moderations, images and audio', () => {
  it('flags exactly the inputs containing EMULATOR_FLAG', async () => {
    const moderation = await openai.moderations.create({ model: 'omni-moderation-latest', input: ['a calm sentence', 'this has EMULATOR_FLAG in it'] });
    expect(moderation.id).toMatch(/^modr-/);
    const [calm, flagged] = moderation.results;
    expect(calm!.flagged).toBe(false);
    expect(Object.values(calm!.categories).every((value) => value === false)).toBe(true);
    expect(flagged!.flagged).toBe(true);
    expect(flagged!.categories.violence).toBe(true);
    expect(flagged!.category_scores.violence).toBeGreaterThan(0.5);
    expect(Object.keys(flagged!.categories)).toEqual(expect.arrayContaining(['harassment', 'hate', 'self-harm', 'sexual', 'violence']));
  });

  it('generates n valid PNG images, deterministic per prompt', async () => {
    const images = await openai.images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse', n: 2 });
    expect(images.data).toHaveLength(2);
    for (const image of images.data!) expect(Buffer.from(image.b64_json!, 'base64').subarray(0, 8)).toEqual(PNG_SIGNATURE);
    const together = client('together', '/together/v1');
    const first = await together.images.generate({ model: 'black-forest-labs/FLUX.1-schnell', prompt: 'a lighthouse' });
    const again = await together.images.generate({ model: 'black-forest-labs/FLUX.1-schnell', prompt: 'a lighthouse' });
    expect(again.data![0]!.b64_json).toBe(first.data![0]!.b64_json);
  });

  it('transcribes a multipart upload deterministically from the file bytes', async () => {
    const audio = Buffer.alloc(64_000, 7);
    const first = await openai.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio, 'clip.wav') });
    const second = await openai.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio, 'same.wav') });
    const other = await openai.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(Buffer.alloc(64_000, 8), 'other.wav') });
    expect(first.text.length).toBeGreaterThan(0);
    expect(second.text).toBe(first.text);
    expect(other.text).not.toBe(first.text);

    const verbose = await groq.audio.transcriptions.create({ model: 'whisper-large-v3', file: await toFile(audio, 'clip.wav'), response_format: 'verbose_json' });
    expect(verbose).toMatchObject({ duration: 2, language: 'english', segments: [] });
  });

  it('returns deterministic audio bytes with the requested format content type', async () => {
    const mp3 = await openai.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello there' });
    expect(mp3.headers.get('content-type')).toMatch(/^audio\/mpeg/);
    const bytes = Buffer.from(await mp3.arrayBuffer());
    const again = Buffer.from(await (await openai.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello there' })).arrayBuffer());
    expect(bytes.subarray(0, 3).toString('latin1')).toBe('ID3');
    expect(again.equals(bytes)).toBe(true);
    const wav = await groq.audio.speech.create({ model: 'playai-tts', voice: 'Fritz-PlayAI', input: 'Hello there', response_format: 'wav' });
    expect(wav.headers.get('content-type')).toMatch(/^audio\/wav/);
  });
});

describe('voyage rerank', () => {
  it('sorts by relevance, honours top_k and return_documents', async () => {
    const documents = ['bananas are yellow', 'the gateway routes requests', 'requests to the gateway are routed by the gateway'];
    const ranked = await post('/voyage/v1/rerank', 'voyage', { model: 'rerank-2', query: 'gateway requests', documents, top_k: 2, return_documents: true });
    expect(ranked.status).toBe(200);
    expect(ranked.body).toMatchObject({ object: 'list', model: 'rerank-2', usage: { total_tokens: expect.any(Number) } });
    expect(ranked.body.data).toHaveLength(2);
    const scores = ranked.body.data.map((item: { relevance_score: number }) => item.relevance_score);
    expect(scores[0]).toBeGreaterThanOrEqual(scores[1]);
    expect(ranked.body.data.map((item: { index: number }) => item.index)).not.toContain(0);
    expect(ranked.body.data[0].document).toBe(documents[ranked.body.data[0].index]);

    const bare = await post('/voyage/v1/rerank', 'voyage', { model: 'rerank-2-lite', query: 'gateway', documents });
    expect(bare.body.data).toHaveLength(3);
    expect(bare.body.data[0]).not.toHaveProperty('document');
  });
});

describe('errors', () => {
  it('rejects a wrong key with OpenAI’s 401 body', async () => {
    const error = await client('openai', '/openai/v1', { apiKey: 'sk-wrong-key-123456' })
      .chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).code).toBe('invalid_api_key');

    const raw = await fetch(`${url}/mistral/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${credentials.apiKeys.openai}` }, body: '{}' });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({ error: { message: expect.stringMatching(/^Incorrect API key provided/), type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
  });

  it('answers 404 model_not_found for a model the provider does not have for that endpoint', async () => {
    const unknown = await openai.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'hi' }] }).catch((caught: unknown) => caught);
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect((unknown as NotFoundError).error).toEqual({ message: 'The model `gpt-9` does not exist or you do not have access to it.', type: 'invalid_request_error', param: null, code: 'model_not_found' });
    // A catalog model of another kind, or of another provider, is not a chat model here either.
    const wrongKind = await openai.chat.completions.create({ model: 'text-embedding-3-small', messages: [{ role: 'user', content: 'hi' }] }).catch((caught: unknown) => caught);
    expect((wrongKind as NotFoundError).code).toBe('model_not_found');
    const otherProvider = await groq.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).catch((caught: unknown) => caught);
    expect((otherProvider as NotFoundError).code).toBe('model_not_found');
  });

  it('serves only the endpoints the catalog gives a provider, and lists its models', async () => {
    const missing = await post('/deepseek/v1/embeddings', 'deepseek', { model: 'deepseek-chat', input: 'x' });
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toBe('Invalid URL (POST /v1/embeddings)');
    const models = await client('perplexity', '/perplexity').models.list();
    expect(models.data.map((model) => model.id)).toEqual(['sonar']);
  });

  it('rejects an invalid body with a 400 naming the parameter', async () => {
    const response = await post('/openai/v1/chat/completions', 'openai', { model: 'gpt-4o' });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: 'invalid_request_error', param: 'messages', code: 'missing_required_parameter' });
  });
});

describe('faults', () => {
  it('answers an injected 429 with retry-after and the rate-limit body', async () => {
    await injectFault({ provider: 'openai', model: 'gpt-4o', fault: { kind: 'status', status: 429, retryAfterSeconds: 7 } });
    const error = await openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).headers.get('retry-after')).toBe('7');
    expect((error as RateLimitError).error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    // The rule was for one request only.
    const next = await openai.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] });
    expect(next.choices[0]!.message.content).toEqual(expect.any(String));
  });

  it('never answers under a timeout fault, so the SDK times out', async () => {
    await injectFault({ provider: 'groq', fault: { kind: 'timeout' } });
    const impatient = client('groq', '/groq/openai/v1', { timeout: 500 });
    const error = await impatient.chat.completions.create({ model: 'llama-3.3-70b-versatile', messages: [{ role: 'user', content: 'hi' }] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIConnectionTimeoutError);
  });

  it('drops a stream after three content chunks, and the SDK iteration throws', async () => {
    await injectFault({ provider: 'openai', fault: { kind: 'disconnect', afterChunks: 3 } });
    const stream = await openai.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Stream something' }], stream: true });
    const pieces: string[] = [];
    const iterate = async () => {
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) pieces.push(chunk.choices[0].delta.content);
    };
    await expect(iterate()).rejects.toThrow();
    // The three chunks written before the drop still arrive; nothing after them does.
    expect(pieces).toHaveLength(3);
  });
});
