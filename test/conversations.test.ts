import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { beginTurn, completeTurn, endTurn, type TurnTarget } from '../shared/conversations/repository.js';
import { expectError } from './support/expect-error.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Conversations of a customer end to end: turns through the gateway's chat path to the emulator,
 * the turn lock in the conversation's row, the limits and codes of spec 1, and client-token reach.
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
  return created.body as { id: string; status: string; customer_id: string };
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

  it('is all or nothing: a turn that fails, refused upstream or broken mid-stream, stores no message and frees the conversation', async () => {
    const conversation = await newConversation();
    const path = `${base}/${conversation.id}/messages`;
    await emulated.fault({ fault: { kind: 'status', status: 400 }, times: 1 });
    try {
      expect((await post(path, { model: MODEL, content: 'refused' })).status).toBe(400);
    } finally {
      await emulated.clearFaults();
    }
    await emulated.fault({ fault: { kind: 'disconnect', afterChunks: 2 }, times: 1 });
    try {
      const res = await fetch(`${gateway.baseUrl}${path}`, { method: 'POST', headers: { ...bearer(developer.key), 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, content: 'broken', stream: true }) });
      expect(await res.text()).toContain('event: error');
    } finally {
      await emulated.clearFaults();
    }
    expect((await get(path)).body.data).toEqual([]);
    expect((await get(`${base}/${conversation.id}`)).body).toMatchObject({ status: 'active', message_count: 0 });
    expect((await post(path, { model: MODEL, content: 'third time' })).status).toBe(200);
    expect((await get(path)).body.data.map((message: { content: string }) => message.content)[0]).toBe('third time');
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
  it('begins only for its customer, while active, not full and not held; an end whose fence moved on writes nothing', async () => {
    const db = gateway.platform.db;
    const conversation = await newConversation();
    const target: TurnTarget = { developerId: developer.accountId, conversationId: conversation.id, customer: { externalId: 'conv-user' }, pinnedCustomerId: null };
    const begin = (at = target) => beginTurn(db, at, 5000, 60_000);
    const complete = (fence: number, user: string, reply: string) => completeTurn(db, conversation.id, fence, { id: user, content: 'hi' }, { id: reply, content: `reply ${reply}`, model: 'm', usage: null });
    const row = async () => (await db.query(`SELECT message_count, last_fence, locked_until FROM conversations WHERE id = $1`, [conversation.id])).rows[0];
    const messageIds = async () => (await db.query(`SELECT id FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq`, [conversation.id])).rows.map((r) => r.id);

    // Another customer's path, or a client token of another customer, finds nothing and takes nothing.
    expect(await begin({ ...target, customer: { externalId: 'conv-other' } })).toEqual({ verdict: 'missing' });
    expect(await begin({ ...target, customer: { id: conversation.customer_id } })).toMatchObject({ verdict: 'begun', fence: 1 });
    await endTurn(db, conversation.id, 1);
    expect(await begin({ ...target, pinnedCustomerId: 'cus_someone_else' })).toEqual({ verdict: 'missing' });
    expect((await row()).locked_until).toBeNull();

    // The beginning's commit skips the wait for the disk; that holds for its own transaction only, never for the pooled connection after it.
    const client = await db.connect();
    try {
      expect(await beginTurn(client, target, 5000, 60_000)).toEqual({ verdict: 'begun', fence: 2, history: [] });
      expect((await client.query(`SHOW synchronous_commit`)).rows[0].synchronous_commit).toBe('on');
    } finally {
      client.release();
    }
    // The turn holds the conversation and nothing is written yet: a second turn is refused.
    expect(await row()).toMatchObject({ message_count: 0, last_fence: '2' });
    expect((await row()).locked_until).not.toBeNull();
    expect(await begin()).toEqual({ verdict: 'locked' });
    expect(await complete(2, 'msg_u2', 'msg_r2')).toMatchObject({ id: 'msg_r2', seq: 2, role: 'assistant', content: 'reply msg_r2' });
    expect(await row()).toMatchObject({ message_count: 2, locked_until: null });
    expect(await begin()).toEqual({ verdict: 'begun', fence: 3, history: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'reply msg_r2' }] });

    // That turn outlived its lock: a later turn takes the conversation over, and the first turn's end is refused whole.
    await db.query(`UPDATE conversations SET locked_until = now() - interval '1 second' WHERE id = $1`, [conversation.id]);
    expect(await begin()).toMatchObject({ verdict: 'begun', fence: 4 });
    expect(await complete(3, 'msg_u3', 'msg_r3')).toBeUndefined();
    await endTurn(db, conversation.id, 3);
    expect((await row()).locked_until).not.toBeNull();
    expect(await complete(4, 'msg_u4', 'msg_r4')).toMatchObject({ id: 'msg_r4', seq: 4 });
    expect(await row()).toMatchObject({ message_count: 4, last_fence: '4', locked_until: null });
    expect(await messageIds()).toEqual(['msg_u2', 'msg_r2', 'msg_u4', 'msg_r4']);

    await db.query(`UPDATE conversations SET message_count = 4999 WHERE id = $1`, [conversation.id]);
    expect(await begin()).toEqual({ verdict: 'full' });
    await db.query(`UPDATE conversations SET message_count = 4, status = 'archived' WHERE id = $1`, [conversation.id]);
    expect(await begin()).toEqual({ verdict: 'archived' });
    await db.query(`UPDATE conversations SET status = 'active', deleted_at = now() WHERE id = $1`, [conversation.id]);
    expect(await begin()).toEqual({ verdict: 'missing' });
    expect(await begin({ ...target, conversationId: 'conv_missing' })).toEqual({ verdict: 'missing' });
    expect(await row()).toMatchObject({ message_count: 4, last_fence: '4' });
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
