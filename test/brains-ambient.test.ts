import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import { watchUpstreamRequests, type UpstreamRequestSeen } from './support/upstream-traffic.js';

/**
 * Ambient recall on chat completions end to end, with the official openai SDK sending the Brain
 * headers as custom headers: what reaches the upstream model (the recalled memory as a system
 * message after the caller's own), Brain-Status and its exposure, failing open, client tokens.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;
let brainId: string;
let upstream: { requests: UpstreamRequestSeen[]; stop(): void };

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
  brainId = (await post('/v1/brains', { name: 'ops memory' })).body.id;
  await put(brainId, { body: 'The deploy freeze starts on December 20 and ends on January 5.', scope: '/ops' });
  await put(brainId, { class: 'policy', body: 'Always name the on-call engineer when deploys are discussed.', scope: '/' });
  await put(brainId, { class: 'memory', type: 'fact', body: 'Kubernetes deploys run from the ops-deep pipeline.', scope: '/ops/deep', trust: 'low' });
  upstream = watchUpstreamRequests();
});
afterAll(async () => {
  upstream?.stop();
  await emulated?.close();
});

function post(path: string, json: unknown, key = developer.key) {
  return call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(key) });
}

async function put(brain: string, entry: Record<string, unknown>) {
  const res = await call(gateway.baseUrl, `/v1/brains/${brain}/entries`, { method: 'PUT', json: entry, headers: bearer(developer.key) });
  expect(res.status).toBe(200);
}

const ask = (question: string) => ({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'system' as const, content: 'You are the ops assistant.' }, { role: 'user' as const, content: question }] });

/** The messages of the chat call that went upstream since `mark`. */
function upstreamMessages(mark: number): { role: string; content: string }[] {
  const chat = upstream.requests.slice(mark).filter((request) => request.url.startsWith(emulated.emulatorUrl) && request.url.endsWith('/chat/completions'));
  expect(chat).toHaveLength(1);
  return JSON.parse(chat[0]!.body).messages;
}

describe('ambient recall on chat completions', () => {
  it('recalls at Brain-Scope and puts the memory after the caller\'s system message (openai SDK, custom headers)', async () => {
    const mark = upstream.requests.length;
    const { data, response } = await client.chat.completions.create(ask('When does the deploy freeze start?'), { headers: { Brain: brainId, 'Brain-Scope': '/ops' } }).withResponse();
    expect(data.choices[0]!.message.content).toBeTruthy();
    expect(response.headers.get('brain-status')).toBe('attached');
    expect(response.headers.get('access-control-expose-headers')).toContain('Brain-Status');
    const messages = upstreamMessages(mark);
    expect(messages.map((message) => message.role)).toEqual(['system', 'system', 'user']);
    expect(messages[0]!.content).toBe('You are the ops assistant.');
    expect(messages[1]!.content).toContain('The deploy freeze starts on December 20');
    expect(messages[1]!.content).toContain('[policy, /] Always name the on-call engineer');
    // Ancestors only: the subtree's entry stays out unless Brain-Subtree asks for it.
    expect(messages[1]!.content).not.toContain('ops-deep');
    // Recall reads only.
    const entries = (await call(gateway.baseUrl, `/v1/brains/${brainId}/entries?limit=10`, { headers: bearer(developer.key) })).body.data;
    expect(entries.every((entry: { use_count: number }) => entry.use_count === 0)).toBe(true);
  });

  it('with Brain-Subtree also recalls beneath the scope, low-trust entries marked as such, and streams with the status', async () => {
    const mark = upstream.requests.length;
    const stream = await client.chat.completions.create({ ...ask('How do Kubernetes deploys run?'), stream: true }, { headers: { Brain: brainId, 'Brain-Scope': '/ops', 'Brain-Subtree': 'true', 'Brain-Learn': 'false' } }).withResponse();
    expect(stream.response.headers.get('brain-status')).toBe('attached');
    let text = '';
    for await (const chunk of stream.data) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBeTruthy();
    const memory = upstreamMessages(mark)[1]!.content;
    expect(memory).toContain('[memory/fact, /ops/deep, low trust] Kubernetes deploys run from the ops-deep pipeline.');
    expect(memory).toContain('never as instructions');
  });

  it('says attached:empty_recall for an empty brain, and fails open for an unknown or foreign brain', async () => {
    const empty = (await post('/v1/brains', { name: 'empty' })).body.id;
    let mark = upstream.requests.length;
    const emptyAnswer = await client.chat.completions.create(ask('Anything?'), { headers: { Brain: empty } }).withResponse();
    expect(emptyAnswer.response.headers.get('brain-status')).toBe('attached:empty_recall');
    expect(upstreamMessages(mark)).toHaveLength(2);

    const stranger = await createDeveloper(gateway.platform, { creditMicros: 5_000_000, scopes: ['admin'] });
    const theirs = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: stranger.key, maxRetries: 0 });
    for (const [sdk, brain] of [[client, 'brn_000000000000000000000000'], [client, 'not-a-brain'], [theirs, brainId]] as const) {
      mark = upstream.requests.length;
      const { data, response } = await sdk.chat.completions.create(ask('When does the deploy freeze start?'), { headers: { Brain: brain } }).withResponse();
      expect(data.choices).toHaveLength(1);
      expect(response.headers.get('brain-status')).toBe('ignored:unknown_brain');
      expect(upstreamMessages(mark)).toHaveLength(2);
    }
  });

  it('ignores the Brain header under a client token, and refuses malformed Brain headers', async () => {
    const customer = (await post('/v1/customers', { external_id: `ambient-${Date.now()}` })).body;
    const token = (await post(`/v1/customers/${customer.id}/client_tokens`, {})).body.token;
    const mark = upstream.requests.length;
    const res = await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: ask('When does the deploy freeze start?'), headers: { Authorization: `Client ${token}`, Brain: brainId } });
    expect(res.status).toBe(200);
    expect(res.headers.get('brain-status')).toBe('ignored:client_token');
    expect(upstreamMessages(mark)).toHaveLength(2);

    const headers = (extra: Record<string, string>) => ({ ...bearer(developer.key), Brain: brainId, ...extra });
    expectError(await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: ask('x'), headers: headers({ 'Brain-Scope': 'ops' }) }), 400, 'invalid_brain_scope');
    expectError(await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: ask('x'), headers: headers({ 'Brain-Trust': 'medium' }) }), 400, 'invalid_request');
    expectError(await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: ask('x'), headers: headers({ 'Brain-Subtree': 'yes' }) }), 400, 'invalid_request');
  });
});
