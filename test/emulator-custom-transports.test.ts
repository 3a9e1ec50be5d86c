import type http from 'node:http';
import { generateKeyPairSync } from 'node:crypto';
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  InvokeModelCommand,
  InvokeModelWithResponseStreamCommand,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { importPKCS8, SignJWT } from 'jose';
import { AzureOpenAI } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { createEmulatorCredentials, deterministicReply, type FaultRule } from '../shared/emulator/core.js';
import { createEmulatorApp } from '../shared/emulator/server.js';
import { customTransportStyles } from '../shared/emulator/styles/custom-transports.js';
import { canonicalPath, verifySigV4 } from '../shared/emulator/styles/custom-transports/sigv4.js';

const credentials = createEmulatorCredentials(['azure']);
let server: http.Server;
let url: string;
let injectFault: (rule: Omit<FaultRule, 'times'> & { times?: number }) => void;
let clearFaults: () => void;

beforeAll(async () => {
  const { app, faults } = createEmulatorApp({ credentials, latencyMs: 0, chunkIntervalMs: 0 }, customTransportStyles);
  injectFault = (rule) => faults.add({ times: 1, ...rule });
  clearFaults = () => faults.clear();
  server = await listen(app, 0, '127.0.0.1');
  url = serverUrl(server);
});
afterEach(() => clearFaults());
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** The `data:` payloads of an SSE body, with the `id:` and `event:` fields of each frame. */
function parseSse(text: string): { id?: string; event?: string; data: string }[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const fields: { id?: string; event?: string; data: string } = { data: '' };
      for (const line of frame.split(/\r?\n/)) {
        const at = line.indexOf(': ');
        const [name, value] = [line.slice(0, at), line.slice(at + 2)];
        if (name === 'data') fields.data += value;
        else if (name === 'id' || name === 'event') fields[name] = value;
      }
      return fields;
    });
}

describe('sigv4 verification against AWS’s published example', () => {
  // AWS's documented IAM ListUsers example (access key AKIDEXAMPLE), with the query sent in another order.
  const example = (signature: string) => {
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
      host: 'iam.amazonaws.com',
      'x-amz-date': '20150830T123600Z',
      authorization: `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=${signature}`,
    };
    const request = { method: 'GET', originalUrl: '/?Version=2010-05-08&Action=ListUsers', headers, get: (name: string) => headers[name.toLowerCase()] };
    const aws = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', region: 'us-east-1' };
    return verifySigV4(request as unknown as Parameters<typeof verifySigV4>[0], Buffer.alloc(0), aws, 'iam', new Date('2015-08-30T12:38:00Z'));
  };

  it('accepts the published signature and refuses one changed digit', () => {
    expect(example('5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7')).toEqual({ ok: true });
    expect(example('5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d8')).toMatchObject({ ok: false, errorType: 'InvalidSignatureException' });
  });

  it('encodes a sent path once more, so a model id’s %3A is signed as %253A', () => {
    expect(canonicalPath('/bedrock/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke')).toBe('/bedrock/model/anthropic.claude-3-haiku-20240307-v1%253A0/invoke');
  });
});

describe('bedrock: AWS Signature V4, checked against the official SDK', () => {
  const haiku = 'anthropic.claude-3-haiku-20240307-v1:0';
  const client = (overrides: { secretAccessKey?: string; accessKeyId?: string; region?: string; systemClockOffset?: number } = {}) =>
    new BedrockRuntimeClient({
      // The SDK signs the exact path it sends, /bedrock prefix included, with host = the emulator's.
      endpoint: `${url}/bedrock`,
      region: overrides.region ?? credentials.aws.region,
      credentials: { accessKeyId: overrides.accessKeyId ?? credentials.aws.accessKeyId, secretAccessKey: overrides.secretAccessKey ?? credentials.aws.secretAccessKey },
      maxAttempts: 1,
      // The SDK defaults to HTTP/2; the emulator (like the gateway's own client) speaks HTTP/1.1.
      requestHandler: new NodeHttpHandler(),
      ...(overrides.systemClockOffset !== undefined ? { systemClockOffset: overrides.systemClockOffset } : {}),
    });
  const claudeBody = (prompt: string, maxTokens = 200) =>
    JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }] });

  it('InvokeModel answers an Anthropic messages body for a model id containing ":"', async () => {
    const response = await client().send(new InvokeModelCommand({ modelId: haiku, contentType: 'application/json', accept: 'application/json', body: claudeBody('hello bedrock') }));
    const message = JSON.parse(new TextDecoder().decode(response.body));
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'claude-3-haiku-20240307', stop_reason: 'end_turn' });
    expect(message.content[0].text).toBe(deterministicReply(haiku, 'hello bedrock').text);
    expect(message.usage.output_tokens).toBe(message.content[0].text.split(' ').length);
  });

  it('InvokeModelWithResponseStream sends event-stream frames the SDK decodes into Anthropic events', async () => {
    const response = await client().send(new InvokeModelWithResponseStreamCommand({ modelId: haiku, contentType: 'application/json', body: claudeBody('stream me') }));
    const events: { type: string; delta?: { text?: string }; 'amazon-bedrock-invocationMetrics'?: { outputTokenCount: number } }[] = [];
    for await (const part of response.body!) {
      expect(part.chunk?.bytes).toBeDefined();
      events.push(JSON.parse(new TextDecoder().decode(part.chunk!.bytes)));
    }
    const expected = deterministicReply(haiku, 'stream me').text;
    expect(events[0]!.type).toBe('message_start');
    expect(events.at(-1)!.type).toBe('message_stop');
    expect(events.filter((event) => event.type === 'content_block_delta').map((event) => event.delta!.text).join('')).toBe(expected);
    expect(events.at(-1)!['amazon-bedrock-invocationMetrics']!.outputTokenCount).toBe(expected.split(' ').length);
  });

  it('Converse answers amazon.nova-pro-v1:0 and stops at maxTokens', async () => {
    const response = await client().send(
      new ConverseCommand({ modelId: 'amazon.nova-pro-v1:0', messages: [{ role: 'user', content: [{ text: 'hello nova' }] }], inferenceConfig: { maxTokens: 3 } }),
    );
    expect(response.output?.message?.content?.[0]?.text).toBe(deterministicReply('amazon.nova-pro-v1:0', 'hello nova', 3).text);
    expect(response.stopReason).toBe('max_tokens');
    expect(response.usage).toMatchObject({ outputTokens: 3 });
    expect(response.usage!.totalTokens).toBe(response.usage!.inputTokens! + 3);
  });

  it('ConverseStream delivers the reply as contentBlockDelta events and ends with metadata', async () => {
    const response = await client().send(new ConverseStreamCommand({ modelId: haiku, messages: [{ role: 'user', content: [{ text: 'converse stream' }] }] }));
    let text = '';
    let stopReason: string | undefined;
    let outputTokens: number | undefined;
    for await (const event of response.stream!) {
      if (event.contentBlockDelta) text += event.contentBlockDelta.delta?.text ?? '';
      if (event.messageStop) stopReason = event.messageStop.stopReason;
      if (event.metadata) outputTokens = event.metadata.usage?.outputTokens;
    }
    const expected = deterministicReply(haiku, 'converse stream').text;
    expect(text).toBe(expected);
    expect(stopReason).toBe('end_turn');
    expect(outputTokens).toBe(expected.split(' ').length);
  });

  it('rejects a wrong secret key with InvalidSignatureException', async () => {
    const error = await client({ secretAccessKey: 'not-the-secret' }).send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'InvalidSignatureException', $metadata: { httpStatusCode: 403 } });
    expect((error as Error).message).toContain('The request signature we calculated does not match the signature you provided');
  });

  it('rejects an unknown access key id with UnrecognizedClientException', async () => {
    const error = await client({ accessKeyId: 'AKIAUNKNOWN000000000' }).send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'UnrecognizedClientException', $metadata: { httpStatusCode: 403 } });
  });

  it('rejects a signature scoped to another region', async () => {
    const error = await client({ region: 'eu-west-1' }).send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'InvalidSignatureException' });
    expect((error as Error).message).toContain('region');
  });

  it('rejects a signature made more than five minutes ago', async () => {
    const error = await client({ systemClockOffset: -10 * 60_000 }).send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'InvalidSignatureException' });
    expect((error as Error).message).toContain('Signature expired');
  });

  it('rejects a body changed after signing', async () => {
    const tampering = client();
    // The deserialize step runs after signing, right before the request goes on the wire.
    tampering.middlewareStack.add(
      (next) => async (args) => {
        (args.request as { body: unknown }).body = claudeBody('hi');
        return next(args);
      },
      { step: 'deserialize' },
    );
    // Same length, so only the content differs from what was signed.
    const error = await tampering.send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('ho') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'InvalidSignatureException', $metadata: { httpStatusCode: 403 } });
  });

  it('rejects an unsigned request', async () => {
    const response = await fetch(`${url}/bedrock/model/${encodeURIComponent(haiku)}/invoke`, { method: 'POST', body: claudeBody('hi') });
    expect(response.status).toBe(403);
    expect(response.headers.get('x-amzn-errortype')).toBe('MissingAuthenticationTokenException');
  });

  it('answers an unknown model and a malformed body with ValidationException', async () => {
    const unknown = await client().send(new InvokeModelCommand({ modelId: 'anthropic.claude-unknown-v1:0', body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ name: 'ValidationException', $metadata: { httpStatusCode: 400 } });
    const noVersion = await client().send(new InvokeModelCommand({ modelId: haiku, body: JSON.stringify({ max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }) })).catch((e: unknown) => e);
    expect(noVersion).toMatchObject({ name: 'ValidationException' });
    expect((noVersion as Error).message).toContain('anthropic_version');
  });

  it('applies an injected status fault after authentication, as ThrottlingException', async () => {
    injectFault({ provider: 'bedrock', model: haiku, fault: { kind: 'status', status: 429 } });
    const error = await client().send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') })).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'ThrottlingException', $metadata: { httpStatusCode: 429 } });
    const retried = await client().send(new InvokeModelCommand({ modelId: haiku, body: claudeBody('hi') }));
    expect(retried.$metadata.httpStatusCode).toBe(200);
  });
});

describe('vertex: service-account JWT exchanged for an OAuth token', () => {
  const account = credentials.googleServiceAccount;
  const base = () => `${url}/vertex/v1/projects/${account.projectId}/locations/us-east5/publishers`;

  async function requestToken(options: { privateKeyPem?: string; audience?: string; scope?: string } = {}) {
    const key = await importPKCS8(options.privateKeyPem ?? account.privateKeyPem, 'RS256');
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: options.scope ?? 'https://www.googleapis.com/auth/cloud-platform' })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(account.clientEmail)
      .setAudience(options.audience ?? `${url}/vertex/token`)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(key);
    const response = await fetch(`${url}/vertex/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }),
    });
    return { status: response.status, body: (await response.json()) as { access_token?: string; expires_in?: number; token_type?: string; error?: string } };
  }

  async function accessToken(): Promise<string> {
    const { status, body } = await requestToken();
    expect(status).toBe(200);
    return body.access_token!;
  }

  const post = (path: string, token: string, body: unknown) =>
    fetch(`${base()}/${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const claudeBody = (prompt: string) => ({ anthropic_version: 'vertex-2023-10-16', max_tokens: 100, messages: [{ role: 'user', content: prompt }] });

  it('issues a one-hour bearer token for an assertion signed with the service-account key', async () => {
    const { status, body } = await requestToken();
    expect(status).toBe(200);
    expect(body).toMatchObject({ expires_in: 3600, token_type: 'Bearer' });
    expect(body.access_token).toMatch(/^ya29\./);
  });

  it('issues no token for an assertion signed by another key', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const { status, body } = await requestToken({ privateKeyPem: other });
    expect(status).toBe(400);
    expect(body.error).toBe('invalid_grant');
    expect(body.access_token).toBeUndefined();
  });

  it('issues no token for the wrong audience or without the cloud-platform scope', async () => {
    const wrongAudience = await requestToken({ audience: 'https://example.com/token' });
    expect(wrongAudience).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const wrongScope = await requestToken({ scope: 'https://www.googleapis.com/auth/userinfo.email' });
    expect(wrongScope).toMatchObject({ status: 400, body: { error: 'invalid_scope' } });
  });

  it('rawPredict answers an Anthropic messages body', async () => {
    const response = await post('anthropic/models/claude-3-haiku@20240307:rawPredict', await accessToken(), claudeBody('hello vertex'));
    expect(response.status).toBe(200);
    const message = (await response.json()) as { content: { text: string }[] };
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'claude-3-haiku-20240307' });
    expect(message.content[0]!.text).toBe(deterministicReply('claude-3-haiku@20240307', 'hello vertex').text);
  });

  it('streamRawPredict answers Anthropic server-sent events', async () => {
    const response = await post('anthropic/models/claude-sonnet-4@20250514:streamRawPredict', await accessToken(), { ...claudeBody('stream vertex'), stream: true });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const frames = parseSse(await response.text());
    expect(frames.map((frame) => frame.event)).toEqual(expect.arrayContaining(['message_start', 'content_block_delta', 'message_stop']));
    const text = frames
      .map((frame) => JSON.parse(frame.data))
      .filter((event) => event.type === 'content_block_delta')
      .map((event) => event.delta.text)
      .join('');
    expect(text).toBe(deterministicReply('claude-sonnet-4@20250514', 'stream vertex').text);
  });

  it('generateContent and streamGenerateContent?alt=sse answer in Gemini shapes', async () => {
    const token = await accessToken();
    const body = { contents: [{ role: 'user', parts: [{ text: 'hello gemini' }] }], generationConfig: { maxOutputTokens: 5 } };
    const expected = deterministicReply('gemini-2.0-flash', 'hello gemini', 5).text;
    const whole = (await (await post('google/models/gemini-2.0-flash:generateContent', token, body)).json()) as { candidates: unknown[]; usageMetadata: { candidatesTokenCount: number } };
    expect(whole.candidates[0]).toMatchObject({ content: { role: 'model', parts: [{ text: expected }] }, finishReason: 'MAX_TOKENS' });
    expect(whole.usageMetadata.candidatesTokenCount).toBe(5);

    const streamed = await post('google/models/gemini-2.0-flash:streamGenerateContent?alt=sse', token, body);
    const chunks = parseSse(await streamed.text()).map((frame) => JSON.parse(frame.data));
    expect(chunks.map((chunk) => chunk.candidates[0].content.parts[0].text).join('')).toBe(expected);
    expect(chunks.at(-1).candidates[0].finishReason).toBe('MAX_TOKENS');

    // Without alt=sse the stream is one JSON array.
    const array = (await (await post('google/models/gemini-2.0-flash:streamGenerateContent', token, body)).json()) as { candidates: { content: { parts: { text: string }[] } }[] }[];
    expect(array.map((chunk) => chunk.candidates[0]!.content.parts[0]!.text).join('')).toBe(expected);
  });

  it('refuses model calls without an issued token, and for another project', async () => {
    const missing = await post('anthropic/models/claude-3-haiku@20240307:rawPredict', 'ya29.made-up', claudeBody('hi'));
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } });
    const token = await accessToken();
    const otherProject = await fetch(`${url}/vertex/v1/projects/someone-else/locations/us-east5/publishers/anthropic/models/claude-3-haiku@20240307:rawPredict`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(claudeBody('hi')),
    });
    expect(otherProject.status).toBe(403);
    expect(await otherProject.json()).toMatchObject({ error: { code: 403, status: 'PERMISSION_DENIED' } });
  });

  it('applies an injected status fault in Google’s error shape', async () => {
    const token = await accessToken();
    injectFault({ provider: 'vertex', fault: { kind: 'status', status: 429 } });
    const response = await post('google/models/gemini-2.0-flash:generateContent', token, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED' } });
  });
});

describe('azure: deployment URLs and the api-key header', () => {
  const azure = (apiKey = credentials.apiKeys.azure!) => new AzureOpenAI({ endpoint: `${url}/azure`, apiKey, apiVersion: '2024-10-21', deployment: 'gpt-4o', maxRetries: 0 });

  it('answers chat completions through the official AzureOpenAI client', async () => {
    const completion = await azure().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello azure' }], max_tokens: 4 });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices[0]!.message.content).toBe(deterministicReply('gpt-4o', 'hello azure', 4).text);
    expect(completion.choices[0]!.finish_reason).toBe('length');
    expect(completion.usage?.completion_tokens).toBe(4);
  });

  it('streams chunks and, with include_usage, a final usage chunk', async () => {
    const stream = await azure().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'stream azure' }], stream: true, stream_options: { include_usage: true } });
    let text = '';
    let completionTokens: number | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
    }
    const expected = deterministicReply('gpt-4o', 'stream azure').text;
    expect(text).toBe(expected);
    expect(completionTokens).toBe(expected.split(' ').length);
  });

  it('refuses a wrong key, and a right key sent as a Bearer token', async () => {
    const error = await azure('wrong-key').chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 401 });
    const bearer = await fetch(`${url}/azure/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21`, {
      method: 'POST',
      headers: { authorization: `Bearer ${credentials.apiKeys.azure}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(bearer.status).toBe(401);
    expect(await bearer.json()).toMatchObject({ error: { code: '401' } });
  });

  it('answers 404 without an api-version and for an unknown deployment', async () => {
    const call = (path: string) =>
      fetch(`${url}/azure/openai/deployments/${path}`, {
        method: 'POST',
        headers: { 'api-key': credentials.apiKeys.azure!, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
      });
    const noVersion = await call('gpt-4o/chat/completions');
    expect(noVersion.status).toBe(404);
    const unknown = await call('gpt-unknown/chat/completions?api-version=2024-10-21');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: 'DeploymentNotFound' } });
  });
});

describe('watsonx: IAM token exchanged from an API key', () => {
  async function iamToken(apikey = credentials.ibmApiKey) {
    const response = await fetch(`${url}/watsonx/identity/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'urn:ibm:params:oauth:grant-type:apikey', apikey }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  const chat = (operation: 'chat' | 'chat_stream', token: string | undefined, prompt = 'hello watsonx') =>
    fetch(`${url}/watsonx/ml/v1/text/${operation}?version=2024-05-01`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ model_id: 'ibm/granite-3-8b-instruct', project_id: 'emulator-project', messages: [{ role: 'user', content: prompt }], max_tokens: 100 }),
    });

  it('exchanges the API key for a one-hour bearer token, and refuses a wrong key', async () => {
    const before = Math.floor(Date.now() / 1000);
    const { status, body } = await iamToken();
    const after = Math.floor(Date.now() / 1000);
    expect(status).toBe(200);
    expect(body).toMatchObject({ refresh_token: 'not_supported', token_type: 'Bearer', expires_in: 3600 });
    expect(body.expiration).toBeGreaterThanOrEqual(before + 3600);
    expect(body.expiration).toBeLessThanOrEqual(after + 3600);
    const wrong = await iamToken('not-the-key');
    expect(wrong.status).toBe(400);
    expect(wrong.body.access_token).toBeUndefined();
    expect(wrong.body.errorCode).toBe('BXNIM0415E');
  });

  it('answers text/chat with the issued token', async () => {
    const { body } = await iamToken();
    const response = await chat('chat', body.access_token as string);
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { choices: { message: { content: string } }[]; usage: { total_tokens: number; prompt_tokens: number; completion_tokens: number } };
    expect(answer).toMatchObject({ model_id: 'ibm/granite-3-8b-instruct', choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'stop' }] });
    expect(answer.choices[0]!.message.content).toBe(deterministicReply('ibm/granite-3-8b-instruct', 'hello watsonx').text);
    expect(answer.usage.total_tokens).toBe(answer.usage.prompt_tokens + answer.usage.completion_tokens);
  });

  it('streams text/chat_stream as numbered `message` events', async () => {
    const { body } = await iamToken();
    const response = await chat('chat_stream', body.access_token as string, 'stream watsonx');
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const frames = parseSse(await response.text());
    expect(frames.map((frame) => frame.id)).toEqual(frames.map((_, i) => String(i + 1)));
    expect(frames.every((frame) => frame.event === 'message')).toBe(true);
    const events = frames.map((frame) => JSON.parse(frame.data));
    expect(events.map((event) => event.choices[0].delta.content).join('')).toBe(deterministicReply('ibm/granite-3-8b-instruct', 'stream watsonx').text);
    expect(events.at(-1)).toMatchObject({ choices: [{ finish_reason: 'stop' }], usage: { completion_tokens: expect.any(Number) } });
  });

  it('refuses chat without a token and with a token IAM never issued', async () => {
    const missing = await chat('chat', undefined);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ status_code: 401, errors: [{ code: 'authorization_rejected' }] });
    const forged = await chat('chat', credentials.ibmApiKey);
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ errors: [{ code: 'authentication_token_not_valid' }] });
  });

  it('cuts an injected-disconnect stream after the given number of chunks', async () => {
    const { body } = await iamToken();
    injectFault({ provider: 'watsonx', fault: { kind: 'disconnect', afterChunks: 2 } });
    const response = await chat('chat_stream', body.access_token as string, 'cut me off');
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let received = '';
    const failure = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return undefined;
        received += new TextDecoder().decode(value);
      }
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(parseSse(received).map((frame) => frame.id)).toEqual(['1', '2']);
  });
});
