import { generateKeyPairSync } from 'node:crypto';
import type http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { catalogModel } from '../shared/models/catalog.js';
import type { Region } from '../shared/models/refs.js';
import { EventStreamDecodeError, readEventStream } from '../shared/providers/aws-event-stream.js';
import { signRequest } from '../shared/providers/aws-sigv4.js';
import { createAzureAdapter } from '../shared/providers/azure.js';
import { createBedrockAdapter } from '../shared/providers/bedrock.js';
import type { BedrockSettings, VertexSettings, WatsonxSettings } from '../shared/providers/settings.js';
import { UpstreamError, type ChatMessage, type ChatRequest, type ChatStreamEvent, type ProviderAdapter } from '../shared/providers/types.js';
import { createVertexAdapter } from '../shared/providers/vertex.js';
import { createWatsonxAdapter } from '../shared/providers/watsonx.js';
import { countTokens, deterministicReply, type Fault } from '../shared/emulator/core.js';
import { createFullEmulator } from '../shared/emulator/emulator.js';
import { encodeBedrockEvent, encodeEventStreamMessage } from '../shared/emulator/styles/custom-transports/event-stream.js';
import { answerUpstream, watchUpstreamRequests, type UpstreamRequestSeen } from './support/upstream-traffic.js';

/**
 * The four custom-transport adapters against the real upstream emulator, in process. The emulator
 * verifies each provider's authentication for real (SigV4, a JWT-bearer assertion, api-key, IAM)
 * and answers deterministically: deterministicReply(<model id as called>, <prompt text>), with one
 * output token per word and countTokens(prompt) input tokens.
 */
const emulator = createFullEmulator();
const { credentials } = emulator;
let server: http.Server;
let url: string;

beforeAll(async () => {
  server = await listen(emulator.app, 0, '127.0.0.1');
  url = serverUrl(server);
});
/** What the current test watches or answers upstream; undone after each test. */
let watching: ReturnType<typeof watchUpstreamRequests> | undefined;
let answering: ReturnType<typeof answerUpstream> | undefined;
function watch(): UpstreamRequestSeen[] {
  watching = watchUpstreamRequests();
  return watching.requests;
}
afterEach(async () => {
  watching?.stop();
  watching = undefined;
  await answering?.restore();
  answering = undefined;
  await fetch(`${url}/_emulator/faults`, { method: 'DELETE' });
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function injectFault(provider: string, fault: Fault): Promise<void> {
  const response = await fetch(`${url}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ provider, fault, times: 1 }) });
  expect(response.status).toBe(204);
}

const bedrockSettings = (overrides: Partial<BedrockSettings> = {}): BedrockSettings => ({ kind: 'aws', baseUrl: `${url}/bedrock`, ...credentials.aws, ...overrides });
const vertexSettings = (overrides: Partial<VertexSettings> = {}): VertexSettings => {
  const { clientEmail, privateKeyPem, projectId } = credentials.googleServiceAccount;
  return { kind: 'google_service_account', baseUrl: `${url}/vertex`, location: 'us-east5', projectId, clientEmail, privateKeyPem, tokenUri: `${url}/vertex/token`, ...overrides };
};
const azureAdapter = (apiKey = credentials.apiKeys.azure!) => createAzureAdapter({ kind: 'azure', endpoint: `${url}/azure`, apiKey, apiVersion: '2024-10-21' });
const watsonxSettings = (overrides: Partial<WatsonxSettings> = {}): WatsonxSettings => ({
  kind: 'ibm_iam',
  baseUrl: `${url}/watsonx`,
  iamUrl: `${url}/watsonx`,
  apiKey: credentials.ibmApiKey,
  projectId: credentials.googleServiceAccount.projectId,
  ...overrides,
});

function chatRequest(catalogId: string, upstreamModel: string, region: Region | undefined, options: { messages?: ChatMessage[]; maxTokens?: number; signal?: AbortSignal } = {}): ChatRequest {
  const model = catalogModel(catalogId);
  if (!model) throw new Error(`no catalog model ${catalogId}`);
  return {
    model,
    upstreamModel,
    region,
    messages: options.messages ?? [{ role: 'user', content: 'hello custom transport' }],
    maxTokens: options.maxTokens,
    signal: options.signal ?? new AbortController().signal,
  };
}

async function collect(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const events: ChatStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** Consumes a stream until it fails, returning what arrived and the failure. */
async function collectUntilFailure(stream: AsyncIterable<ChatStreamEvent>): Promise<{ events: ChatStreamEvent[]; error: unknown }> {
  const events: ChatStreamEvent[] = [];
  try {
    for await (const event of stream) events.push(event);
  } catch (error) {
    return { events, error };
  }
  return { events, error: undefined };
}

const textOf = (events: ChatStreamEvent[]) => events.map((event) => (event.type === 'delta' ? (event.content ?? '') : '')).join('');
const failureOf = (promise: Promise<unknown>) => promise.then(
  () => {
    throw new Error('expected a failure');
  },
  (error: unknown) => error,
);

/**
 * One row per adapter for what all four must do alike. `replyModel` is the model id the emulator
 * derives its answer from (the id in the upstream URL or body).
 */
interface Case {
  name: string;
  provider: string;
  adapter: () => ProviderAdapter;
  refusedAdapter: () => ProviderAdapter;
  refusedStatus: number;
  request: (options?: Parameters<typeof chatRequest>[3]) => ChatRequest;
  replyModel: string;
}

const haiku = catalogModel('svc:anthropic/claude-3-haiku-20240307')!;
const otherGoogleKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

const CASES: Case[] = [
  {
    name: 'bedrock, anthropic @us-cloud1 through the us. inference profile',
    provider: 'bedrock',
    adapter: () => createBedrockAdapter(bedrockSettings()),
    refusedAdapter: () => createBedrockAdapter(bedrockSettings({ secretAccessKey: 'not-the-secret' })),
    refusedStatus: 403,
    request: (options) => chatRequest(haiku.id, haiku.cloudIds!.cloud1, 'us-cloud1', options),
    replyModel: `us.${haiku.cloudIds!.cloud1}`,
  },
  {
    name: 'bedrock, amazon.nova-pro-v1:0',
    provider: 'bedrock',
    adapter: () => createBedrockAdapter(bedrockSettings()),
    refusedAdapter: () => createBedrockAdapter(bedrockSettings({ secretAccessKey: 'not-the-secret' })),
    refusedStatus: 403,
    request: (options) => chatRequest('svc:bedrock/amazon.nova-pro-v1:0', 'amazon.nova-pro-v1:0', undefined, options),
    replyModel: 'amazon.nova-pro-v1:0',
  },
  {
    name: 'vertex, anthropic @us-cloud2 (rawPredict)',
    provider: 'vertex',
    adapter: () => createVertexAdapter(vertexSettings()),
    refusedAdapter: () => createVertexAdapter(vertexSettings({ privateKeyPem: otherGoogleKey })),
    refusedStatus: 401,
    request: (options) => chatRequest(haiku.id, haiku.cloudIds!.cloud2, 'us-cloud2', options),
    replyModel: haiku.cloudIds!.cloud2,
  },
  {
    name: 'vertex, gemini-2.0-flash (generateContent)',
    provider: 'vertex',
    adapter: () => createVertexAdapter(vertexSettings()),
    refusedAdapter: () => createVertexAdapter(vertexSettings({ privateKeyPem: otherGoogleKey })),
    refusedStatus: 401,
    request: (options) => chatRequest('svc:vertex/gemini-2.0-flash', 'gemini-2.0-flash', undefined, options),
    replyModel: 'gemini-2.0-flash',
  },
  {
    name: 'azure, deployment gpt-4o',
    provider: 'azure',
    adapter: () => azureAdapter(),
    refusedAdapter: () => azureAdapter('wrong-key'),
    refusedStatus: 401,
    request: (options) => chatRequest('svc:azure/gpt-4o', 'gpt-4o', undefined, options),
    replyModel: 'gpt-4o',
  },
  {
    name: 'watsonx, ibm/granite-3-8b-instruct',
    provider: 'watsonx',
    adapter: () => createWatsonxAdapter(watsonxSettings()),
    refusedAdapter: () => createWatsonxAdapter(watsonxSettings({ apiKey: 'not-the-key' })),
    refusedStatus: 401,
    request: (options) => chatRequest('svc:watsonx/ibm/granite-3-8b-instruct', 'ibm/granite-3-8b-instruct', undefined, options),
    replyModel: 'ibm/granite-3-8b-instruct',
  },
];

describe.each(CASES)('$name', ({ provider, adapter, refusedAdapter, refusedStatus, request, replyModel }) => {
  const prompt = 'hello custom transport';
  const expected = deterministicReply(replyModel, prompt);

  it('answers chat with the emulator’s content and usage, the same every time', async () => {
    const subject = adapter();
    const first = await subject.chat!(request());
    expect(first).toEqual({
      content: expected.text,
      finishReason: 'stop',
      usage: { inputTokens: countTokens(prompt), outputTokens: expected.text.split(' ').length },
    });
    expect(await subject.chat!(request())).toEqual(first);
  });

  it('sends system messages upstream as part of the prompt', async () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'answer briefly' },
      { role: 'user', content: [{ type: 'text', text: prompt }] },
    ];
    const result = await adapter().chat!(request({ messages }));
    expect(result.content).toBe(deterministicReply(replyModel, `answer briefly\n${prompt}`).text);
  });

  it('streams deltas that concatenate to the chat content, then finish, then usage last', async () => {
    const subject = adapter();
    const whole = await subject.chat!(request());
    const events = await collect(subject.chatStream!(request()));
    const deltas = events.filter((event) => event.type === 'delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(textOf(events)).toBe(whole.content);
    expect(events[0]).toEqual({ type: 'opened' });
    expect(events.slice(deltas.length + 1)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: whole.usage },
    ]);
  });

  it('stops at maxTokens with finish reason length, in chat and in stream', async () => {
    const result = await adapter().chat!(request({ maxTokens: 3 }));
    expect(result).toMatchObject({ content: deterministicReply(replyModel, prompt, 3).text, finishReason: 'length', usage: { outputTokens: 3 } });
    const events = await collect(adapter().chatStream!(request({ maxTokens: 3 })));
    expect(textOf(events)).toBe(result.content);
    expect(events.at(-2)).toEqual({ type: 'finish', finishReason: 'length' });
    expect(events.at(-1)).toMatchObject({ type: 'usage', usage: { outputTokens: 3 } });
  });

  it('surfaces refused credentials as a non-retryable UpstreamError', async () => {
    const error = await failureOf(refusedAdapter().chat!(request()));
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, status: refusedStatus, retryable: false });
    const streamed = await collectUntilFailure(refusedAdapter().chatStream!(request()));
    expect(streamed.events).toEqual([]);
    expect(streamed.error).toMatchObject({ provider, status: refusedStatus, retryable: false });
  });

  it('surfaces an injected 429 as a retryable UpstreamError with Retry-After', async () => {
    const subject = adapter();
    await subject.chat!(request()); // tokens, where there are any, are already held
    await injectFault(provider, { kind: 'status', status: 429, retryAfterSeconds: 2 });
    const error = await failureOf(subject.chat!(request()));
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, status: 429, retryable: true, retryAfterSeconds: 2 });
    // The fault was used up: the next call answers.
    expect((await subject.chat!(request())).content).toBe(expected.text);
  });

  it('turns a stream cut after two chunks into a retryable UpstreamError', async () => {
    const subject = adapter();
    await subject.chat!(request());
    await injectFault(provider, { kind: 'disconnect', afterChunks: 2 });
    const { events, error } = await collectUntilFailure(subject.chatStream!(request()));
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider, retryable: true });
    expect(events.some((event) => event.type === 'finish' || event.type === 'usage')).toBe(false);
    expect(expected.text.startsWith(textOf(events))).toBe(true);
  });

  it('rethrows the AbortError of an aborted request', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await failureOf(adapter().chat!(request({ signal: controller.signal })));
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(error).not.toBeInstanceOf(UpstreamError);
  });
});

describe('aws sigv4 signing', () => {
  // AWS's published example: IAM ListUsers, access key AKIDEXAMPLE, 2015-08-30T12:36:00Z.
  const example = {
    method: 'GET',
    url: 'https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' },
    body: undefined,
    region: 'us-east-1',
    service: 'iam',
    accessKeyId: 'AKIDEXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
    now: new Date('2015-08-30T12:36:00Z'),
    includeContentSha256: false,
  };

  it('reproduces AWS’s published ListUsers signature', () => {
    expect(signRequest(example)).toEqual({
      'x-amz-date': '20150830T123600Z',
      authorization:
        'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7',
    });
  });

  it('signs the query in canonical order and the content hash and session token when sent', () => {
    const reordered = signRequest({ ...example, url: 'https://iam.amazonaws.com/?Version=2010-05-08&Action=ListUsers' });
    expect(reordered.authorization).toBe(signRequest(example).authorization);
    const withToken = signRequest({ ...example, includeContentSha256: true, sessionToken: 'session-token' });
    expect(withToken['x-amz-security-token']).toBe('session-token');
    // sha256 of the empty body
    expect(withToken['x-amz-content-sha256']).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(withToken.authorization).toContain('SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token,');
    expect(withToken.authorization).not.toBe(signRequest(example).authorization);
  });

  it('signs with a wrong secret something the emulator refuses, and with the right one something it accepts', async () => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'signed' }] }] });
    const call = async (secretAccessKey: string) => {
      const target = `${url}/bedrock/model/${encodeURIComponent('amazon.nova-pro-v1:0')}/converse`;
      const headers = { 'content-type': 'application/json' };
      const signed = signRequest({ method: 'POST', url: target, headers, body, ...credentials.aws, secretAccessKey, service: 'bedrock', now: new Date() });
      return fetch(target, { method: 'POST', headers: { ...headers, ...signed }, body });
    };
    expect((await call(credentials.aws.secretAccessKey)).status).toBe(200);
    const refused = await call('not-the-secret');
    expect(refused.status).toBe(403);
    expect(refused.headers.get('x-amzn-errortype')).toBe('InvalidSignatureException');
  });
});

describe('aws event-stream decoding', () => {
  const frames = [
    encodeEventStreamMessage({ ':event-type': 'messageStart', ':message-type': 'event' }, Buffer.from('{"role":"assistant"}')),
    encodeEventStreamMessage({ ':event-type': 'contentBlockDelta', ':message-type': 'event' }, Buffer.from('{"delta":{"text":"hi"}}')),
  ];
  async function* pieces(bytes: Buffer, size: number) {
    for (let at = 0; at < bytes.length; at += size) yield new Uint8Array(bytes.subarray(at, at + size));
  }

  it('decodes messages split at every byte boundary', async () => {
    const messages = [];
    for await (const message of readEventStream(pieces(Buffer.concat(frames), 1))) messages.push(message);
    expect(messages.map((message) => message.headers[':event-type'])).toEqual(['messageStart', 'contentBlockDelta']);
    expect(new TextDecoder().decode(messages[1]!.payload)).toBe('{"delta":{"text":"hi"}}');
  });

  it('refuses a corrupted payload and a body that ends inside a message', async () => {
    const corrupted = Buffer.from(frames[0]!);
    corrupted[corrupted.length - 6]! ^= 0xff;
    const read = async (bytes: Buffer) => {
      for await (const _ of readEventStream(pieces(bytes, 7))) {
        // drain
      }
    };
    await expect(read(corrupted)).rejects.toThrow(EventStreamDecodeError);
    await expect(read(corrupted)).rejects.toThrow(/CRC/);
    await expect(read(Buffer.concat([frames[0]!, frames[1]!.subarray(0, 20)]))).rejects.toThrow(/ended inside a message/);
  });
});

describe('region routes', () => {
  it('bedrock @eu-cloud1 calls the eu. inference profile; with an overridden base URL, signed for the configured region', async () => {
    const result = await createBedrockAdapter(bedrockSettings()).chat!(chatRequest(haiku.id, haiku.cloudIds!.cloud1, 'eu-cloud1'));
    expect(result.content).toBe(deterministicReply(`eu.${haiku.cloudIds!.cloud1}`, 'hello custom transport').text);
  });

  it('bedrock with the default host swaps the host’s region for the geography’s and signs for it', async () => {
    // Amazon's hosts are out of this machine's reach: they are answered here, and what was sent to them recorded.
    const seen: { url: string; authorization: string }[] = [];
    answering = answerUpstream();
    for (const host of ['https://bedrock-runtime.eu-central-1.amazonaws.com', 'https://bedrock-runtime.us-west-2.amazonaws.com']) {
      answering.agent
        .get(host)
        .intercept({ path: () => true, method: 'POST' })
        .reply((request) => {
          seen.push({ url: `${host}${request.path}`, authorization: String((request.headers as Record<string, string>).authorization ?? '') });
          return { statusCode: 200, data: { output: { message: { content: [{ text: 'ok' }] } }, stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1 } }, responseOptions: { headers: { 'content-type': 'application/json' } } };
        });
    }
    const adapter = createBedrockAdapter(bedrockSettings({ baseUrl: 'https://bedrock-runtime.us-west-2.amazonaws.com', region: 'us-west-2' }));
    await adapter.chat!(chatRequest(haiku.id, haiku.cloudIds!.cloud1, 'eu-cloud1'));
    await adapter.chat!(chatRequest(haiku.id, haiku.cloudIds!.cloud1, 'us-cloud1'));
    expect(seen.map((call) => call.url)).toEqual([
      `https://bedrock-runtime.eu-central-1.amazonaws.com/model/${encodeURIComponent(`eu.${haiku.cloudIds!.cloud1}`)}/converse`,
      `https://bedrock-runtime.us-west-2.amazonaws.com/model/${encodeURIComponent(`us.${haiku.cloudIds!.cloud1}`)}/converse`,
    ]);
    expect(seen[0]!.authorization).toMatch(/Credential=[^/]+\/\d{8}\/eu-central-1\/bedrock\/aws4_request/);
    expect(seen[1]!.authorization).toMatch(/Credential=[^/]+\/\d{8}\/us-west-2\/bedrock\/aws4_request/);
  });

  it('vertex @eu-cloud2 calls a European location', async () => {
    const seen = watch();
    const result = await createVertexAdapter(vertexSettings()).chat!(chatRequest(haiku.id, haiku.cloudIds!.cloud2, 'eu-cloud2'));
    expect(result.content).toBe(deterministicReply(haiku.cloudIds!.cloud2, 'hello custom transport').text);
    expect(seen.at(-1)?.url).toContain('/locations/europe-west1/publishers/anthropic/models/claude-3-haiku@20240307:rawPredict');
  });
});

describe('access tokens are minted once and reused', () => {
  /** Counts requests to the token endpoints as they go out; every request still reaches the emulator. */
  function countTokenRequests(path: string): () => number {
    const seen = watch();
    return () => seen.filter((request) => request.url.endsWith(path)).length;
  }

  it('vertex exchanges one assertion for all calls, chat and stream, Anthropic and Gemini', async () => {
    const tokenRequests = countTokenRequests('/vertex/token');
    const adapter = createVertexAdapter(vertexSettings());
    // Concurrent first calls share one exchange.
    await Promise.all([adapter.chat!(chatRequest(haiku.id, haiku.cloudIds!.cloud2, 'us-cloud2')), adapter.chat!(chatRequest('svc:vertex/gemini-2.0-flash', 'gemini-2.0-flash', undefined))]);
    await collect(adapter.chatStream!(chatRequest(haiku.id, haiku.cloudIds!.cloud2, 'us-cloud2')));
    await collect(adapter.chatStream!(chatRequest('svc:vertex/gemini-2.0-flash', 'gemini-2.0-flash', undefined)));
    expect(tokenRequests()).toBe(1);
    // Another adapter (another process, say) holds its own token.
    await createVertexAdapter(vertexSettings()).chat!(chatRequest('svc:vertex/gemini-2.0-flash', 'gemini-2.0-flash', undefined));
    expect(tokenRequests()).toBe(2);
  });

  it('watsonx exchanges the API key at IAM once for all calls', async () => {
    const tokenRequests = countTokenRequests('/watsonx/identity/token');
    const adapter = createWatsonxAdapter(watsonxSettings());
    const request = () => chatRequest('svc:watsonx/ibm/granite-3-8b-instruct', 'ibm/granite-3-8b-instruct', undefined);
    await Promise.all([adapter.chat!(request()), adapter.chat!(request())]);
    await collect(adapter.chatStream!(request()));
    await adapter.chat!(request());
    expect(tokenRequests()).toBe(1);
  });

  it('a refused exchange is not cached: the next call tries again', async () => {
    const tokenRequests = countTokenRequests('/watsonx/identity/token');
    const adapter = createWatsonxAdapter(watsonxSettings({ apiKey: 'not-the-key' }));
    const request = () => chatRequest('svc:watsonx/ibm/granite-3-8b-instruct', 'ibm/granite-3-8b-instruct', undefined);
    await expect(adapter.chat!(request())).rejects.toMatchObject({ status: 401, retryable: false });
    await expect(adapter.chat!(request())).rejects.toMatchObject({ status: 401, retryable: false });
    expect(tokenRequests()).toBe(2);
  });
});

describe('tool calls through Converse', () => {
  it('maps tools and a tool-call history to Converse shapes the emulator accepts', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ];
    const request = { ...chatRequest('svc:bedrock/amazon.nova-pro-v1:0', 'amazon.nova-pro-v1:0', undefined, { messages }), tools: [{ type: 'function' as const, function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }] };
    const seen = watch();
    const result = await createBedrockAdapter(bedrockSettings()).chat!(request);
    expect(JSON.parse(seen.at(-1)!.body)).toMatchObject({
      messages: [
        { role: 'user', content: [{ text: 'weather in Paris?' }] },
        { role: 'assistant', content: [{ toolUse: { toolUseId: 'call_1', name: 'weather', input: { city: 'Paris' } } }] },
        { role: 'user', content: [{ toolResult: { toolUseId: 'call_1', content: [{ text: 'sunny' }] } }] },
      ],
      toolConfig: { tools: [{ toolSpec: { name: 'weather', inputSchema: { json: { type: 'object' } } } }] },
    });
    // The emulator's prompt is every text block: the tool blocks carry none at the top level.
    expect(result.content).toBe(deterministicReply('amazon.nova-pro-v1:0', 'weather in Paris?').text);
  });
});

describe('bedrock converse-stream events beyond text', () => {
  /** Answers the next converse-stream call with these event-stream frames, as Bedrock would. */
  function answerWithFrames(frames: Buffer[]): void {
    answering = answerUpstream();
    answering.agent
      .get(new URL(url).origin)
      .intercept({ path: (path) => path.endsWith('/converse-stream'), method: 'POST' })
      .reply(200, Buffer.concat(frames), { headers: { 'content-type': 'application/vnd.amazon.eventstream' } });
  }
  const request = () => chatRequest('svc:bedrock/amazon.nova-pro-v1:0', 'amazon.nova-pro-v1:0', undefined);

  it('turns toolUse blocks into numbered tool-call deltas and finish reason tool_calls', async () => {
    answerWithFrames([
      encodeBedrockEvent('messageStart', { role: 'assistant' }),
      encodeBedrockEvent('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Let me look.' } }),
      encodeBedrockEvent('contentBlockStop', { contentBlockIndex: 0 }),
      encodeBedrockEvent('contentBlockStart', { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tooluse_1', name: 'weather' } } }),
      encodeBedrockEvent('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '{"city":' } } }),
      encodeBedrockEvent('contentBlockDelta', { contentBlockIndex: 1, delta: { toolUse: { input: '"Paris"}' } } }),
      encodeBedrockEvent('contentBlockStop', { contentBlockIndex: 1 }),
      encodeBedrockEvent('messageStop', { stopReason: 'tool_use' }),
      encodeBedrockEvent('metadata', { usage: { inputTokens: 12, outputTokens: 9, cacheReadInputTokens: 4 } }),
    ]);
    const events = await collect(createBedrockAdapter(bedrockSettings()).chatStream!(request()));
    expect(events).toEqual([
      { type: 'opened' },
      { type: 'delta', content: 'Let me look.' },
      { type: 'delta', toolCalls: [{ index: 0, id: 'tooluse_1', name: 'weather' }] },
      { type: 'delta', toolCalls: [{ index: 0, arguments: '{"city":' }] },
      { type: 'delta', toolCalls: [{ index: 0, arguments: '"Paris"}' }] },
      { type: 'finish', finishReason: 'tool_calls' },
      // inputTokens is the whole prompt, cached reads included.
      { type: 'usage', usage: { inputTokens: 16, outputTokens: 9, cacheReadTokens: 4 } },
    ]);
  });

  it('turns an exception frame mid-stream into an UpstreamError of its status', async () => {
    answerWithFrames([
      encodeBedrockEvent('messageStart', { role: 'assistant' }),
      encodeEventStreamMessage({ ':exception-type': 'throttlingException', ':content-type': 'application/json', ':message-type': 'exception' }, Buffer.from('{"message":"slow down"}')),
    ]);
    const { events, error } = await collectUntilFailure(createBedrockAdapter(bedrockSettings()).chatStream!(request()));
    expect(events).toEqual([{ type: 'opened' }]);
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ provider: 'bedrock', status: 429, retryable: true });
    expect((error as Error).message).toContain('slow down');
  });

  it('does not open a stream whose first frame is an exception (the call can still be retried whole)', async () => {
    answerWithFrames([
      encodeEventStreamMessage({ ':exception-type': 'throttlingException', ':content-type': 'application/json', ':message-type': 'exception' }, Buffer.from('{"message":"slow down"}')),
    ]);
    const { events, error } = await collectUntilFailure(createBedrockAdapter(bedrockSettings()).chatStream!(request()));
    expect(events).toEqual([]);
    expect(error).toMatchObject({ provider: 'bedrock', status: 429, retryable: true });
  });

  it('refuses a stream that ends cleanly without messageStop and metadata', async () => {
    answerWithFrames([encodeBedrockEvent('messageStart', { role: 'assistant' }), encodeBedrockEvent('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'half' } })]);
    const { events, error } = await collectUntilFailure(createBedrockAdapter(bedrockSettings()).chatStream!(request()));
    expect(events).toEqual([{ type: 'opened' }, { type: 'delta', content: 'half' }]);
    expect(error).toMatchObject({ provider: 'bedrock', retryable: true });
  });
});

describe('prompt caching marks', () => {
  /** Each JSON body sent upstream, read as it goes out; the request still reaches the emulator. */
  function recordBodies(): () => Record<string, unknown>[] {
    const seen = watch();
    return () => seen.filter((request) => request.body.startsWith('{')).map((request) => JSON.parse(request.body) as Record<string, unknown>);
  }
  const messages: ChatMessage[] = [
    { role: 'system', content: 'a long shared preamble', cache_control: { type: 'ephemeral' } },
    { role: 'user', content: 'hello cache' },
  ];

  it('bedrock adds cachePoint blocks for a caching model, and none for a model without prompt caching', async () => {
    const bodies = recordBodies();
    const adapter = createBedrockAdapter(bedrockSettings());
    const claude = await adapter.chat!({ ...chatRequest(haiku.id, haiku.cloudIds!.cloud1, 'us-cloud1', { messages }), promptCache: 'auto' });
    await adapter.chat!({ ...chatRequest('svc:bedrock/amazon.nova-pro-v1:0', 'amazon.nova-pro-v1:0', undefined, { messages }), promptCache: 'auto' });
    expect(bodies()[0]).toMatchObject({
      system: [{ text: 'a long shared preamble' }, { cachePoint: { type: 'default' } }],
      messages: [{ role: 'user', content: [{ text: 'hello cache' }, { cachePoint: { type: 'default' } }] }],
    });
    expect(JSON.stringify(bodies()[1])).not.toContain('cachePoint');
    expect(claude.content).toBe(deterministicReply(`us.${haiku.cloudIds!.cloud1}`, 'a long shared preamble\nhello cache').text);
  });

  it('vertex carries cache_control onto the Anthropic blocks', async () => {
    const bodies = recordBodies();
    await createVertexAdapter(vertexSettings()).chat!({ ...chatRequest(haiku.id, haiku.cloudIds!.cloud2, 'us-cloud2', { messages }), promptCache: 'auto' });
    expect(bodies().at(-1)).toEqual({
      anthropic_version: 'vertex-2023-10-16',
      max_tokens: 4096,
      system: [{ type: 'text', text: 'a long shared preamble', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello cache', cache_control: { type: 'ephemeral' } }] }],
    });
  });
});
