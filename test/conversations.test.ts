import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { appendReply, beginTurn } from '../shared/conversations/repository.js';
import { expectError } from './support/expect-error.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Conversations of a customer end to end: turns through the gateway's chat path to the emulator,
 * the turn lock in Redis, the limits and codes of spec 1, and client-token reach.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({}, 50_000_000));
  await post('/v1/customers', { external_id: 'conv-user' });
  await post('/v1/customers', { external_id: 'conv-other' });
});
afterAll(() => emulated?.close());

const MODEL = 'svc:openai/gpt-4o-mini';
const post = (path: string, json: unknown, headers: Record<string, string> = bearer(developer.key)) => call(gateway.baseUrl, path, { method: 'POST', json, headers });
const patch = (path: string, json: unknown) => call(gateway.baseUrl, path, { method: 'PATCH', json, headers: bearer(developer.key) });
const get = (path: string, headers: Record<string, string> = bearer(developer.key)) => call(gateway.baseUrl, path, { headers });
const base = '/v1/customers/ext:conv-user/conversations';

async function newConversation(metadata?: Record<string, string>) {
  const created = await post(base, metadata ? { metadata } : {});
  expect(created.status).toBe(200);
  return created.body as { id: string; status: string };
}

describe('turns', () => {
  it('appends the message, answers over the history and keeps both', async () => {
    const conversation = await newConversation({ topic: 'travel' });
    expect(conversation).toMatchObject({ object: 'conversation', status: 'active', metadata: { topic: 'travel' }, message_count: 0 });
    const first = await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'Plan a day in Oslo' });
    expect(first.status).toBe(200);
    expect(first.body.message).toMatchObject({ role: 'assistant', model: expect.any(String) });
    expect(first.body.message.content.length).toBeGreaterThan(0);
    const second = await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'And the next day?' });
    expect(second.body.usage.prompt_tokens).toBeGreaterThan(first.body.usage.prompt_tokens);
    const messages = (await get(`${base}/${conversation.id}/messages`)).body.data;
    expect(messages.map((message: { role: string }) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect((await get(`${base}/${conversation.id}`)).body).toMatchObject({ message_count: 4, status: 'active' });
  });

  it('streams a turn: the reply as deltas, then the stored message', async () => {
    const conversation = await newConversation();
    const res = await fetch(`${gateway.baseUrl}${base}/${conversation.id}/messages`, {
      method: 'POST',
      headers: { ...bearer(developer.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, content: 'Tell me a short story', stream: true }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = (await res.text()).split('\n\n').filter(Boolean);
    const parsed = events.filter((block) => block.startsWith('event:')).map((block) => ({ event: block.split('\n')[0]!.slice(7), data: JSON.parse(block.split('\n')[1]!.slice(6)) }));
    const deltas = parsed.filter((event) => event.event === 'conversation.message.delta');
    expect(deltas.length).toBeGreaterThan(1);
    const completed = parsed.at(-1)!;
    expect(completed.event).toBe('conversation.message.completed');
    expect(deltas.map((event) => event.data.delta).join('')).toBe(completed.data.message.content);
    expect(events.at(-1)).toBe('data: [DONE]');
    const stored = (await get(`${base}/${conversation.id}/messages`)).body.data;
    expect(stored.map((message: { role: string }) => message.role)).toEqual(['user', 'assistant']);
    expect(stored[1].content).toBe(completed.data.message.content);
  });

  it('lets exactly one of two concurrent turns win; the other gets conversation_locked', async () => {
    const conversation = await newConversation();
    await emulated.fault({ fault: { kind: 'latency', ms: 400 }, times: 2 });
    try {
      const results = await Promise.all([0, 1].map((i) => post(`${base}/${conversation.id}/messages`, { model: MODEL, content: `turn ${i}` })));
      expect(results.map((result) => result.status).sort()).toEqual([200, 409]);
      expect(results.find((result) => result.status === 409)!.body.error.code).toBe('conversation_locked');
    } finally {
      await emulated.clearFaults();
    }
    expect((await get(`${base}/${conversation.id}/messages`)).body.data).toHaveLength(2);
    // The lock was released: the next turn goes through.
    expect((await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'again' })).status).toBe(200);
  });

  it('shows a conversation as locked while a turn runs, and filters on it', async () => {
    const conversation = await newConversation();
    await emulated.fault({ fault: { kind: 'latency', ms: 800 }, times: 1 });
    const turn = post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'slow one' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await get(`${base}/${conversation.id}`)).body.status).toBe('locked');
    expect((await get(`${base}?status=locked`)).body.data.map((c: { id: string }) => c.id)).toContain(conversation.id);
    expect((await turn).status).toBe(200);
    expect((await get(`${base}/${conversation.id}`)).body.status).toBe('active');
  });
});

describe('rules and codes', () => {
  it('refuses status locked, bad list filters, archived turns, full conversations and large metadata', async () => {
    const conversation = await newConversation();
    expectError(await patch(`${base}/${conversation.id}`, { status: 'locked' }), 400, 'invalid_status_transition', { param: 'status' });
    expectError(await get(`${base}?status=open`), 400, 'invalid_status', { param: 'status' });
    expect((await patch(`${base}/${conversation.id}`, { status: 'archived' })).body.status).toBe('archived');
    expectError(await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'hello?' }), 409, 'conversation_archived');
    expect((await get(`${base}?status=archived`)).body.data.map((c: { id: string }) => c.id)).toContain(conversation.id);
    expect((await patch(`${base}/${conversation.id}`, { status: 'active' })).body.status).toBe('active');

    await gateway.platform.db.query(`UPDATE conversations SET message_count = 4999 WHERE id = $1`, [conversation.id]);
    expectError(await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'one more' }), 409, 'conversation_full');

    expectError(await post(base, { metadata: { blob: 'x'.repeat(500), more: 'y'.repeat(500), again: 'z'.repeat(500), last: 'w'.repeat(500), end: 'v'.repeat(200) } }), 400, 'metadata_too_large');
    expectError(await patch(`${base}/${conversation.id}`, {}), 400, 'empty_patch');
    expectError(await get(`${base}/conv_nope`), 404, 'not_found');
    expectError(await get('/v1/customers/ext:nobody/conversations'), 404, 'not_found');
    const fresh = await newConversation();
    expectError(await post(`${base}/${fresh.id}/messages`, { model: 'gpt-4o', content: 'x' }), 400, 'invalid_model_ref');
    expect((await get(`${base}/${fresh.id}`)).body.message_count).toBe(0);
  });
});

describe('a turn in the database', () => {
  // The one-statement turn writes (repository.ts) checked against what can change under a turn between its checks and its writes.
  it('begins only while active, not full and not fenced; a reply whose fence moved on writes nothing', async () => {
    const db = gateway.platform.db;
    const conversation = await newConversation();
    const begin = (fence: number, messageId: string) => beginTurn(db, conversation.id, fence, { id: messageId, content: 'hi' }, 5000, 60_000);
    const row = async () => (await db.query(`SELECT message_count, last_fence, locked_until FROM conversations WHERE id = $1`, [conversation.id])).rows[0];

    expect(await begin(1, 'msg_t1')).toBe('begun');
    expect(await row()).toMatchObject({ message_count: 1, last_fence: '1' });
    expect((await row()).locked_until).not.toBeNull();
    expect(await begin(1, 'msg_t1b')).toBe('fenced');
    // A later turn took the conversation over: the first turn's reply is refused and nothing is written.
    expect(await begin(2, 'msg_t2')).toBe('begun');
    expect(await appendReply(db, conversation.id, 1, { id: 'msg_r1', role: 'assistant', content: 'late', model: 'm', usage: null })).toBeUndefined();
    const reply = await appendReply(db, conversation.id, 2, { id: 'msg_r2', role: 'assistant', content: 'on time', model: 'm', usage: null });
    expect(reply).toMatchObject({ id: 'msg_r2', seq: 3, role: 'assistant', content: 'on time' });
    expect(await row()).toMatchObject({ message_count: 3, last_fence: '2', locked_until: null });
    expect((await db.query(`SELECT id FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq`, [conversation.id])).rows.map((r) => r.id)).toEqual(['msg_t1', 'msg_t2', 'msg_r2']);

    await db.query(`UPDATE conversations SET message_count = 4999 WHERE id = $1`, [conversation.id]);
    expect(await begin(3, 'msg_t3')).toBe('full');
    await db.query(`UPDATE conversations SET message_count = 3, status = 'archived' WHERE id = $1`, [conversation.id]);
    expect(await begin(3, 'msg_t3')).toBe('archived');
    expect(await beginTurn(db, 'conv_missing', 1, { id: 'msg_x', content: 'x' }, 5000, 60_000)).toBe('missing');
    expect((await row()).message_count).toBe(3);
  });
});

describe('client tokens', () => {
  it('read one conversation and send and list its messages, for their own customer only', async () => {
    const conversation = await newConversation();
    const minted = await post('/v1/customers/ext:conv-user/client_tokens', { scope: ['conversations'] });
    const token = { Authorization: `Client ${minted.body.token}` };
    const path = `${base}/${conversation.id}`;
    expect((await get(path, token)).body.id).toBe(conversation.id);
    expect((await post(`${path}/messages`, { model: MODEL, content: 'from the browser' }, token)).status).toBe(200);
    expect((await get(`${path}/messages`, token)).body.data).toHaveLength(2);
    expectError(await get(base, token), 403, 'endpoint_not_allowed_for_client_token');
    expectError(await post(base, {}, token), 403, 'endpoint_not_allowed_for_client_token');

    const other = await post('/v1/customers/ext:conv-other/client_tokens', { scope: ['conversations'] });
    expectError(await get(path, { Authorization: `Client ${other.body.token}` }), 404, 'not_found');
  });
});
