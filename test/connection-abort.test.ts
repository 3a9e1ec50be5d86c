import { getEventListeners } from 'node:events';
import { Router } from 'express';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { abortWhenClientLeaves } from '../api/middleware/metered-call.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * The abort signal a metered call hands its upstream request belongs to the client's connection:
 * a keep-alive connection's calls share it one after another. So every call must take back the
 * listeners it put on it, on every path (success, retries, a refusal, a stream cut mid-way), or a
 * long-lived connection would pile them up. A probe route reports the connection's signal.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let previousSignal: AbortSignal | undefined;

const probe = () => {
  const router = Router();
  router.get('/v1/_test/connection-signal', (_req, res) => {
    const signal = abortWhenClientLeaves(res);
    const sameAsPrevious = signal === previousSignal;
    previousSignal = signal;
    res.json({ abortListeners: getEventListeners(signal, 'abort').length, sameAsPrevious, aborted: signal.aborted });
  });
  return [router];
};

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000, { routes: probe }));
});
afterAll(() => emulated?.close());

/** One keep-alive connection to the gateway (undici's Client never opens a second). */
function connection() {
  const client = new Client(gateway.baseUrl, { pipelining: 1 });
  const send = async (method: 'GET' | 'POST', path: string, json?: unknown) => {
    const response = await client.request({
      method,
      path,
      headers: { ...bearer(developer.key), ...(json !== undefined && { 'content-type': 'application/json' }) },
      ...(json !== undefined && { body: JSON.stringify(json) }),
    });
    return { status: response.statusCode, text: await response.body.text() };
  };
  const signalState = async () => JSON.parse((await send('GET', '/v1/_test/connection-signal')).text) as { abortListeners: number; sameAsPrevious: boolean; aborted: boolean };
  /** The connection's signal after a call: still the same one, no listener left on it, not aborted. */
  const expectCleanSignal = async () => expect(await signalState()).toEqual({ abortListeners: 0, sameAsPrevious: true, aborted: false });
  return { send, signalState, expectCleanSignal, close: () => client.close() };
}

const hello = [{ role: 'user', content: 'hello there' }];

describe("a connection's abort signal", () => {
  it('is shared by the calls of one connection, and every call takes its listeners back', async () => {
    const client = connection();
    await client.signalState();
    const calls: Array<[string, unknown, number]> = [
      ['/v1/chat/completions', { model: 'svc:openai/gpt-4o-mini', messages: hello }, 200],
      ['/v1/chat/completions', { model: 'svc:openai/gpt-4o-mini', messages: hello, stream: true, stream_options: { include_usage: true } }, 200],
      ['/v1/chat/completions', { model: 'svc:anthropic/claude-sonnet-4-20250514', messages: hello, stream: true }, 200],
      ['/v1/chat/completions', { model: 'svc:vertex/gemini-2.0-flash', messages: hello }, 200],
      ['/v1/chat/completions', { model: 'svc:bedrock/amazon.nova-pro-v1:0', messages: hello, stream: true }, 200],
      ['/v1/chat/completions', { model: 'svc:openai/gpt-4o-mini', messages: hello, moderation: 'pre_and_post' }, 200],
      ['/v1/embeddings', { model: 'text-embedding-3-small', input: ['one', 'two'] }, 200],
      ['/v1/moderations', { input: 'a harmless sentence' }, 200],
      ['/v1/rerank', { model: 'svc:cohere/rerank-multilingual-v3.0', query: 'weather', documents: [{ text: 'sun' }, { text: 'rain' }] }, 200],
      ['/v1/images/generations', { model: 'svc:openai/gpt-image-1', prompt: 'a lighthouse', n: 1 }, 200],
      ['/v1/audio/speech', { model: 'svc:openai/tts-1', input: 'hello', voice: 'alloy' }, 200],
    ];
    for (const [path, body, status] of calls) {
      const response = await client.send('POST', path, body);
      expect({ path, status: response.status }, response.text).toEqual({ path, status });
      await client.expectCleanSignal();
    }
    await client.close();
  });

  it('comes back clean from retries, refusals, cascades and a stream cut mid-way', async () => {
    const client = connection();
    await client.signalState();
    const chat = (body: Record<string, unknown>) => client.send('POST', '/v1/chat/completions', { messages: hello, ...body });

    await emulated.fault({ provider: 'openai', fault: { kind: 'status', status: 503 }, times: 1 });
    expect((await chat({ model: 'svc:openai/gpt-4o-mini' })).status).toBe(200);
    await client.expectCleanSignal();

    await emulated.fault({ provider: 'openai', fault: { kind: 'status', status: 400 }, times: 1 });
    expect(JSON.parse((await chat({ model: 'svc:openai/gpt-4o-mini' })).text).error.code).toBe('upstream_rejected_request');
    await client.expectCleanSignal();

    await emulated.fault({ provider: 'groq', fault: { kind: 'status', status: 503 }, times: 10 });
    expect((await chat({ model: ['svc:groq/llama-3.3-70b-versatile', 'svc:openai/gpt-4o-mini'] })).status).toBe(200);
    await client.expectCleanSignal();

    await emulated.fault({ provider: 'openai', fault: { kind: 'disconnect', afterChunks: 3 }, times: 1 });
    const cut = await chat({ model: 'svc:openai/gpt-4o-mini', stream: true });
    expect(cut.text).toContain('upstream_unavailable');
    await client.expectCleanSignal();
    await client.close();
  });

  it('is a different signal on another connection', async () => {
    const first = connection();
    await first.signalState();
    const second = connection();
    expect((await second.signalState()).sameAsPrevious).toBe(false);
    expect((await second.signalState()).sameAsPrevious).toBe(true);
    await Promise.all([first.close(), second.close()]);
  });
});
