import OpenAI, { NotFoundError, toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, listApiKeys, revokeApiKey } from '../shared/accounts/accounts.js';
import { findStoreById } from '../shared/vector-stores/repository.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { expectError } from './support/expect-error.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import { receiverEnv, startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.js';

/**
 * Deleted means gone, as on OpenAI: once DELETE answers, every read, update, list and use of the
 * resource answers 404 with the resource's own not-found code, even while a background deletion
 * still removes its content. No worker runs here, so the deletion workflows of vector stores and
 * brains are started but never finish: what the API answers cannot come from a finished workflow.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let receiver: WebhookReceiver;
let client: OpenAI;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper(receiverEnv(receiver)));
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(async () => {
  await emulated?.close();
  await receiver?.close();
});

const MODEL = 'svc:openai/gpt-4o-mini';
const send = (method: string, path: string, json?: unknown) => call(gateway.baseUrl, path, { method, ...(json !== undefined && { json }), headers: bearer(developer.key) });
const get = (path: string) => send('GET', path);
const post = (path: string, json: unknown) => send('POST', path, json);
const patch = (path: string, json: unknown) => send('PATCH', path, json);
const del = (path: string) => send('DELETE', path);

async function ok(response: Promise<{ status: number; body: any }>) {
  const answered = await response;
  expect(answered.status, JSON.stringify(answered.body)).toBe(200);
  return answered.body;
}

async function upload(name: string, content: string): Promise<string> {
  return (await client.files.create({ file: await toFile(Buffer.from(content), name), purpose: 'assistants' })).id;
}

const idsOf = (page: { data: { id: string }[] }) => page.data.map((item) => item.id);

describe('a deleted vector store', () => {
  it('answers reads 404 vector_store_not_found and writes 409 vector_store_unavailable while its deletion workflow has not run', async () => {
    const fileId = await upload('notes.txt', 'Invoices are issued on the first day of each month.');
    const store = await ok(post('/v1/vector_stores', { name: 'Doomed', embedding_model: 'text-embedding-3-small' }));
    const kept = await ok(post('/v1/vector_stores', { name: 'Kept', embedding_model: 'text-embedding-3-small' }));
    // The file is attached but never ingested (no consumers run): the store has content for the workflow to remove.
    await ok(post(`/v1/vector_stores/${store.id}/files`, { file_id: fileId }));
    const batch = await ok(post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: [fileId] }));

    expect(await client.vectorStores.delete(store.id)).toEqual({ id: store.id, object: 'vector_store.deleted', deleted: true });
    expect((await findStoreById(gateway.platform.db, store.id))?.state).toBe('deleting');

    // What SDK code that checks existence does.
    await expect(client.vectorStores.retrieve(store.id)).rejects.toBeInstanceOf(NotFoundError);
    // Reads find nothing: 404, as OpenAI answers once DELETE returned.
    for (const response of [
      await get(`/v1/vector_stores/${store.id}`),
      await post(`/v1/vector_stores/${store.id}/search`, { query: 'invoices' }),
      await get(`/v1/vector_stores/${store.id}/files`),
      await get(`/v1/vector_stores/${store.id}/files/${fileId}`),
      await get(`/v1/vector_stores/${store.id}/files/${fileId}/content`),
      await get(`/v1/vector_stores/${store.id}/file_batches/${batch.id}`),
      await get(`/v1/vector_stores/${store.id}/file_batches/${batch.id}/files`),
    ]) {
      expectError(response, 404, 'vector_store_not_found');
    }
    // Writes are refused as spec 1 says of a store deleting or deleted: 409 vector_store_unavailable.
    const writes = {
      update: await post(`/v1/vector_stores/${store.id}`, { name: 'renamed' }),
      attach: await post(`/v1/vector_stores/${store.id}/files`, { file_id: fileId }),
      attributes: await post(`/v1/vector_stores/${store.id}/files/${fileId}`, { attributes: { a: 'b' } }),
      cancel: await post(`/v1/vector_stores/${store.id}/files/${fileId}/cancel`, {}),
      retry: await post(`/v1/vector_stores/${store.id}/files/${fileId}/retry`, {}),
      detach: await del(`/v1/vector_stores/${store.id}/files/${fileId}`),
      batch: await post(`/v1/vector_stores/${store.id}/file_batches`, { file_ids: [fileId] }),
      batchCancel: await post(`/v1/vector_stores/${store.id}/file_batches/${batch.id}/cancel`, {}),
      unlock: await post(`/v1/vector_stores/${store.id}/unlock`, { passphrase: 'a long enough passphrase' }),
      lock: await del(`/v1/vector_stores/${store.id}/unlock`),
      migrate: await post(`/v1/vector_stores/${store.id}/migrate`, { embedding_model: 'text-embedding-3-large' }),
      deleteAgain: await del(`/v1/vector_stores/${store.id}`),
    };
    const refusals = Object.fromEntries(Object.entries(writes).map(([name, response]) => [name, `${response.status} ${response.body?.error?.code}`]));
    expect(refusals).toEqual(Object.fromEntries(Object.keys(writes).map((name) => [name, '409 vector_store_unavailable'])));
    const listed = idsOf(await ok(get('/v1/vector_stores?limit=200')));
    expect(listed).toContain(kept.id);
    expect(listed).not.toContain(store.id);
    // The workflow still has its work to do: the row is there, deleting, behind the 404s.
    expect((await findStoreById(gateway.platform.db, store.id))?.state).toBe('deleting');
  });
});

describe('a deleted assistant', () => {
  it('answers 404 not_found to retrieve, update and delete, leaves lists, and cannot run', async () => {
    const assistant = await ok(post('/v1/assistants', { model: MODEL, name: 'Doomed helper' }));
    const thread = await ok(post('/v1/threads', {}));
    expect(await ok(del(`/v1/assistants/${assistant.id}`))).toEqual({ id: assistant.id, object: 'assistant.deleted', deleted: true });

    expectError(await get(`/v1/assistants/${assistant.id}`), 404, 'not_found');
    expectError(await post(`/v1/assistants/${assistant.id}`, { name: 'renamed' }), 404, 'not_found');
    expectError(await del(`/v1/assistants/${assistant.id}`), 404, 'not_found');
    expect(idsOf(await ok(get('/v1/assistants?limit=100')))).not.toContain(assistant.id);
    // A run names it as it would an unknown assistant.
    expectError(await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id }), 400, 'invalid_assistant_id', { param: 'assistant_id' });
    // Its name is free again.
    await ok(post('/v1/assistants', { model: MODEL, name: 'Doomed helper' }));
  });
});

describe('a deleted thread', () => {
  it('answers 404 not_found on the thread, its messages and its runs', async () => {
    const assistant = await ok(post('/v1/assistants', { model: MODEL }));
    const thread = await ok(post('/v1/threads', { messages: [{ role: 'user', content: 'hello' }] }));
    const message = (await ok(get(`/v1/threads/${thread.id}/messages`))).data[0];
    expect(await ok(del(`/v1/threads/${thread.id}`))).toEqual({ id: thread.id, object: 'thread.deleted', deleted: true });

    for (const response of [
      await get(`/v1/threads/${thread.id}`),
      await post(`/v1/threads/${thread.id}`, { metadata: { a: 'b' } }),
      await get(`/v1/threads/${thread.id}/messages`),
      await post(`/v1/threads/${thread.id}/messages`, { role: 'user', content: 'still there?' }),
      await get(`/v1/threads/${thread.id}/messages/${message.id}`),
      await post(`/v1/threads/${thread.id}/messages/${message.id}`, { metadata: { a: 'b' } }),
      await get(`/v1/threads/${thread.id}/runs`),
      await post(`/v1/threads/${thread.id}/runs`, { assistant_id: assistant.id }),
      await del(`/v1/threads/${thread.id}`),
    ]) {
      expectError(response, 404, 'not_found');
    }
  });
});

describe('a deleted file', () => {
  it('answers 404 not_found to retrieve, content and delete, leaves the list, and cannot be attached', async () => {
    const fileId = await upload('gone.txt', 'soon gone');
    const store = await ok(post('/v1/vector_stores', { name: 'Files', embedding_model: 'text-embedding-3-small' }));
    expect(await client.files.delete(fileId)).toEqual({ id: fileId, object: 'file', deleted: true });

    await expect(client.files.retrieve(fileId)).rejects.toBeInstanceOf(NotFoundError);
    expectError(await get(`/v1/files/${fileId}`), 404, 'not_found');
    expectError(await get(`/v1/files/${fileId}/content`), 404, 'not_found');
    expectError(await del(`/v1/files/${fileId}`), 404, 'not_found');
    expect(idsOf(await ok(get('/v1/files?limit=100')))).not.toContain(fileId);
    expectError(await post(`/v1/vector_stores/${store.id}/files`, { file_id: fileId }), 404, 'file_not_found', { param: 'file_id' });
  });
});

describe('a deleted conversation', () => {
  it('answers 404 not_found to retrieve, update, its messages and delete, and leaves the list', async () => {
    await ok(post('/v1/customers', { external_id: 'gone-user' }));
    const base = '/v1/customers/ext:gone-user/conversations';
    const conversation = await ok(post(base, {}));
    const kept = await ok(post(base, {}));
    expect(await ok(del(`${base}/${conversation.id}`))).toEqual({ id: conversation.id, object: 'conversation.deleted', deleted: true });

    for (const response of [
      await get(`${base}/${conversation.id}`),
      await patch(`${base}/${conversation.id}`, { status: 'archived' }),
      await get(`${base}/${conversation.id}/messages`),
      await post(`${base}/${conversation.id}/messages`, { model: MODEL, content: 'hello again' }),
      await del(`${base}/${conversation.id}`),
    ]) {
      expectError(response, 404, 'not_found');
    }
    const listed = idsOf(await ok(get(base)));
    expect(listed).toContain(kept.id);
    expect(listed).not.toContain(conversation.id);
  });
});

describe('a deleted brain', () => {
  it('answers 404 not_found on the brain, its entries, recall and mounts while its deletion workflow has not run', async () => {
    const brain = await ok(post('/v1/brains', { name: 'Doomed brain' }));
    const written = await ok(send('PUT', `/v1/brains/${brain.id}/entries`, { body: 'The build takes nine minutes.' }));
    expect(await ok(del(`/v1/brains/${brain.id}`))).toEqual({ id: brain.id, object: 'brain.deleted', deleted: true });
    const state = await gateway.platform.db.query(`SELECT state FROM brains WHERE id = $1`, [brain.id]);
    expect(state.rows).toEqual([{ state: 'deleting' }]);

    for (const response of [
      await get(`/v1/brains/${brain.id}`),
      await patch(`/v1/brains/${brain.id}`, { name: 'renamed' }),
      await send('PUT', `/v1/brains/${brain.id}/entries`, { body: 'one more' }),
      await get(`/v1/brains/${brain.id}/entries`),
      await get(`/v1/brains/${brain.id}/entries/${written.entry_id}`),
      await post(`/v1/brains/${brain.id}/recall`, { query: 'build' }),
      await get(`/v1/brains/${brain.id}/mounts`),
      await del(`/v1/brains/${brain.id}`),
    ]) {
      expectError(response, 404, 'not_found');
    }
    expect(idsOf(await ok(get('/v1/brains?limit=100')))).not.toContain(brain.id);
  });
});

describe('a deleted webhook endpoint', () => {
  it('answers 404 not_found to retrieve, update, test, deliveries and delete, and leaves the list', async () => {
    const endpoint = await ok(post('/v1/webhooks', { url: `${receiver.origin}/gone`, events: ['customer.created'] }));
    const deleted = await del(`/v1/webhooks/${endpoint.id}`);
    expect(deleted.status).toBe(204);

    for (const response of [
      await get(`/v1/webhooks/${endpoint.id}`),
      await patch(`/v1/webhooks/${endpoint.id}`, { status: 'paused' }),
      await post(`/v1/webhooks/${endpoint.id}/rotate_secret`, {}),
      await post(`/v1/webhooks/${endpoint.id}/test`, {}),
      await get(`/v1/webhooks/${endpoint.id}/deliveries`),
      await del(`/v1/webhooks/${endpoint.id}`),
    ]) {
      expectError(response, 404, 'not_found');
    }
    expect(idsOf(await ok(get('/v1/webhooks')))).not.toContain(endpoint.id);
  });
});

describe('a revoked API key', () => {
  it('authenticates nothing, leaves the list, and a second revocation is 404 not_found', async () => {
    const { key, plaintext } = await createApiKey(gateway.platform.db, developer.accountId, { name: 'doomed key', scopes: ['api:read'] });
    const balance = () => call(gateway.baseUrl, '/v1/balance', { headers: bearer(plaintext) });
    expect((await balance()).status).toBe(200);
    await revokeApiKey(gateway.platform.db, developer.accountId, key.id);

    expectError(await balance(), 401, 'invalid_token');
    expect((await listApiKeys(gateway.platform.db, developer.accountId)).map((row) => row.id)).not.toContain(key.id);
    await expect(revokeApiKey(gateway.platform.db, developer.accountId, key.id)).rejects.toMatchObject({ status: 404, code: 'not_found' });
  });
});
