import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform, walletBalanceMicros } from './support/test-platform.js';

/**
 * slot: aliases and dyn: profiles: their endpoints (/v1/model_slots, /v1/dynamic_profiles) and
 * what chat completions make of them, with the emulator as every provider.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper());
});
afterAll(() => emulated?.close());

const api = (method: string, path: string, json?: unknown, key = developer.key) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(key) });
const chat = (json: Record<string, unknown>, key = developer.key) => api('POST', '/v1/chat/completions', json, key);
const hello = [{ role: 'user', content: 'Hello there' }];
const GROQ = 'svc:groq/llama-3.3-70b-versatile';

const walletMicros = () => walletBalanceMicros(gateway.platform, developer.accountId);

describe('/v1/model_slots', () => {
  it('creates (201), replaces (200), reads, lists with the cursor envelope and deletes a slot', async () => {
    const created = await api('PUT', '/v1/model_slots/crud-a', { target: GROQ, description: 'cheap and fast' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: 'model_slot', name: 'crud-a', ref: 'slot:crud-a', target: GROQ, description: 'cheap and fast' });
    const replaced = await api('PUT', '/v1/model_slots/crud-a', { target: 'match:anthropic/sonnet' });
    expect({ status: replaced.status, target: replaced.body.target, description: replaced.body.description }).toEqual({ status: 200, target: 'match:anthropic/sonnet', description: null });
    expect((await api('GET', '/v1/model_slots/crud-a')).body.target).toBe('match:anthropic/sonnet');

    await api('PUT', '/v1/model_slots/crud-b', { target: 'slot:crud-a' });
    const first = await api('GET', '/v1/model_slots?limit=1');
    expect(first.body).toMatchObject({ object: 'list', has_more: true, data: [{ name: 'crud-a' }] });
    const second = await api('GET', `/v1/model_slots?limit=1&after=${first.body.next_cursor}`);
    expect(second.body.data.map((slot: { name: string }) => slot.name)).toEqual(['crud-b']);

    const deleted = await api('DELETE', '/v1/model_slots/crud-b');
    expect(deleted.body).toEqual({ object: 'model_slot', name: 'crud-b', deleted: true });
    expect((await api('GET', '/v1/model_slots/crud-b')).status).toBe(404);
    const again = await api('DELETE', '/v1/model_slots/crud-b');
    expect({ status: again.status, code: again.body.error.code }).toEqual({ status: 404, code: 'not_found' });
  });

  it.each([
    [{ target: 'gpt-4o' }, 'invalid_model_ref', 'target'],
    [{ target: 'svc:openai/gpt-7' }, 'invalid_model_ref', 'target'],
    [{ target: 'svc:anthropic/claude-opus-4-20250514@eu' }, 'invalid_model_ref', 'target'],
    [{ target: 'match:openai/sonnet' }, 'unsupported_provider', 'target'],
    [{ target: 'user:sk-x/gpt-4o' }, 'byok_not_supported', 'target'],
    [{ target: 'slot:self' }, 'slot_cycle', 'target'],
    [{}, 'invalid_request', 'target'],
    [{ target: GROQ, colour: 'blue' }, 'invalid_request', 'colour'],
  ])('PUT %j → 400 %s', async (json, code, param) => {
    const response = await api('PUT', '/v1/model_slots/self', json);
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code, param });
  });

  it('refuses a name that a reference could not carry', async () => {
    const response = await api('PUT', '/v1/model_slots/has%20space', { target: GROQ });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'name' });
  });

  it('needs api:write to change and api:read to read; another developer sees none of it', async () => {
    await api('PUT', '/v1/model_slots/private', { target: GROQ });
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read', 'api:chat'] });
    const write = await api('PUT', '/v1/model_slots/private', { target: GROQ }, reader.key);
    expect({ status: write.status, code: write.body.error.code }).toEqual({ status: 403, code: 'insufficient_scope' });
    expect((await api('GET', '/v1/model_slots/private', undefined, reader.key)).status).toBe(404);
    expect((await api('GET', '/v1/model_slots', undefined, reader.key)).body.data).toEqual([]);
    const used = await chat({ model: 'slot:private', messages: hello }, reader.key);
    expect(used.body.error.code).toBe('unknown_slot');
    const client = await call(gateway.baseUrl, '/v1/model_slots', { headers: { Authorization: 'Client a.b.c' } });
    expect({ status: client.status, code: client.body.error.code }).toEqual({ status: 403, code: 'endpoint_not_allowed_for_client_token' });
  });
});

describe('slot: references in chat completions', () => {
  it('follows a chain of slots to a concrete model, saying which (X-Svc-Model-Resolved)', async () => {
    await api('PUT', '/v1/model_slots/fast', { target: GROQ });
    await api('PUT', '/v1/model_slots/default', { target: 'slot:fast' });
    const response = await chat({ model: 'slot:default', messages: hello });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-svc-model-resolved')).toBe(GROQ);
    expect(response.body.model).toBe(GROQ);
    const { rows } = await gateway.platform.db.query('SELECT model FROM usage_records WHERE request_id = $1', [response.headers.get('x-request-id')]);
    expect(rows).toEqual([{ model: GROQ }]);

    // Re-pointing the slot changes the next call, with no change on the caller's side.
    await api('PUT', '/v1/model_slots/fast', { target: 'match:anthropic/haiku' });
    expect((await chat({ model: 'slot:default', messages: hello })).headers.get('x-svc-model-resolved')).toMatch(/^svc:anthropic\/claude-haiku/);
  });

  it('400 slot_cycle for slots that point at each other, and 400 unknown_slot for an undefined one; nothing billed', async () => {
    await api('PUT', '/v1/model_slots/ping', { target: 'slot:pong' });
    await api('PUT', '/v1/model_slots/pong', { target: 'slot:ping' });
    const before = await walletMicros();
    const cycle = await chat({ model: 'slot:ping', messages: hello });
    expect({ status: cycle.status, type: cycle.body.error.type, code: cycle.body.error.code, param: cycle.body.error.param }).toEqual({ status: 400, type: 'invalid_request_error', code: 'slot_cycle', param: 'model' });
    expect(cycle.body.error.message).toContain('slot:ping');
    const unknown = await chat({ model: 'slot:nowhere', messages: hello });
    expect({ status: unknown.status, code: unknown.body.error.code, param: unknown.body.error.param }).toEqual({ status: 400, code: 'unknown_slot', param: 'model' });
    expect(await walletMicros()).toBe(before);
  });

  it('takes slots in a cascade', async () => {
    await api('PUT', '/v1/model_slots/cascade-cheap', { target: GROQ });
    await emulated.fault({ provider: 'groq', fault: { kind: 'status', status: 503 }, times: 10 });
    try {
      const response = await chat({ model: ['slot:cascade-cheap', 'svc:openai/gpt-4o-mini'], messages: hello });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-svc-models-tried')).toBe(`${GROQ},svc:openai/gpt-4o-mini`);
    } finally {
      await emulated.clearFaults();
    }
  });
});

describe('/v1/dynamic_profiles and dyn: references', () => {
  const profile = {
    description: 'cheap unless the request needs more',
    rules: [
      { when: { tools: true }, model: 'svc:openai/gpt-4o' },
      { when: { vision: true }, model: 'svc:mistral/mistral-small-latest' },
      { when: { json_schema: true }, model: 'svc:openai/gpt-4o-mini' },
      { when: { min_difficulty: 0.35 }, model: 'match:anthropic/opus' },
      { when: { max_prompt_tokens: 200 }, model: 'slot:router-cheap' },
    ],
    default_model: 'svc:openai/gpt-4.1',
  };

  beforeAll(async () => {
    await api('PUT', '/v1/model_slots/router-cheap', { target: GROQ });
    const created = await api('PUT', '/v1/dynamic_profiles/router', profile);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: 'dynamic_profile', name: 'router', ref: 'dyn:router', rules: profile.rules, default_model: 'svc:openai/gpt-4.1' });
  });

  const routed = async (json: Record<string, unknown>) => {
    const response = await chat({ model: 'dyn:router', ...json });
    expect(response.status).toBe(200);
    return { resolved: response.headers.get('x-svc-model-resolved'), profile: response.headers.get('x-svc-dynamic-profile'), reason: response.headers.get('x-svc-dynamic-reason') };
  };

  it('chooses by request shape and says which profile chose and why', async () => {
    expect(await routed({ messages: hello })).toEqual({ resolved: GROQ, profile: 'router', reason: expect.stringMatching(/^rule 5 \(prompt_tokens \d+ <= 200\)$/) });

    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
    expect(await routed({ messages: hello, tools })).toEqual({ resolved: 'svc:openai/gpt-4o', profile: 'router', reason: 'rule 1 (tools)' });

    const image = [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }] }];
    expect((await routed({ messages: image })).resolved).toBe('svc:mistral/mistral-small-latest');

    const format = { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] } } };
    const schema = await routed({ messages: hello, response_format: format });
    // gpt-4o-mini is what the rule names, so it is also the requested model's resolution.
    expect(schema).toEqual({ resolved: 'svc:openai/gpt-4o-mini', profile: 'router', reason: 'rule 3 (json_schema)' });

    const hard = await routed({ messages: [{ role: 'user', content: 'Prove the theorem step by step, then analyze the algorithm and its complexity.' }] });
    expect(hard.resolved).toMatch(/^svc:anthropic\/claude-opus/);
    expect(hard.reason).toMatch(/^rule 4 \(difficulty 0\.\d\d >= 0\.35\)$/);

    const long = await routed({ messages: [{ role: 'user', content: 'plain words '.repeat(200) }] });
    expect(long.resolved).toBe('svc:openai/gpt-4.1');
    expect(long.reason).toMatch(/^default_model \(no rule matched: prompt_tokens \d+, no tools, no vision, no json_schema, difficulty 0\.\d\d\)$/);
  });

  it('400 unknown_dynamic_profile for an undefined profile, before anything is billed', async () => {
    const before = await walletMicros();
    const response = await chat({ model: 'dyn:nope', messages: hello });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'unknown_dynamic_profile', param: 'model' });
    expect(await walletMicros()).toBe(before);
  });

  it.each([
    [{ default_model: 'dyn:router' }, 'invalid_model_ref', 'default_model'],
    [{ default_model: 'gpt-4o' }, 'invalid_model_ref', 'default_model'],
    [{ rules: [{ when: {}, model: 'dyn:other' }], default_model: GROQ }, 'invalid_model_ref', 'rules.0.model'],
    [{ rules: [{ when: { shoe_size: 3 }, model: GROQ }], default_model: GROQ }, 'invalid_request', 'rules.0.when.shoe_size'],
    [{ rules: [{ when: { min_prompt_tokens: 10, max_prompt_tokens: 5 }, model: GROQ }], default_model: GROQ }, 'invalid_request', 'rules.0.when'],
    [{ rules: [{ when: { max_difficulty: 2 }, model: GROQ }], default_model: GROQ }, 'invalid_request', 'rules.0.when.max_difficulty'],
    [{ rules: [] }, 'invalid_request', 'default_model'],
  ])('PUT %j → 400 %s', async (json, code, param) => {
    const response = await api('PUT', '/v1/dynamic_profiles/bad', json);
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code, param });
  });

  it('reads, lists and deletes profiles; a deleted profile is unknown to the next call', async () => {
    await api('PUT', '/v1/dynamic_profiles/short-lived', { default_model: GROQ });
    expect((await api('GET', '/v1/dynamic_profiles/short-lived')).body).toMatchObject({ name: 'short-lived', rules: [], default_model: GROQ });
    const listed = await api('GET', '/v1/dynamic_profiles');
    expect(listed.body.data.map((entry: { name: string }) => entry.name)).toEqual(['router', 'short-lived']);
    expect((await chat({ model: 'dyn:short-lived', messages: hello })).headers.get('x-svc-dynamic-reason')).toMatch(/^default_model/);
    expect((await api('DELETE', '/v1/dynamic_profiles/short-lived')).body).toEqual({ object: 'dynamic_profile', name: 'short-lived', deleted: true });
    expect((await chat({ model: 'dyn:short-lived', messages: hello })).body.error.code).toBe('unknown_dynamic_profile');
    expect((await api('GET', '/v1/dynamic_profiles/short-lived')).status).toBe(404);
  });
});
