import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { catalogModel } from '../shared/models/catalog.js';
import { startEmulatedGateway, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper } from './support/test-platform.js';

let emulated: EmulatedGateway;
let developer: TestDeveloper;
let client: OpenAI;

beforeAll(async () => {
  emulated = await startEmulatedGateway({ VOYAGE_API_KEY: '' });
  developer = await createDeveloper(emulated.gateway.platform, { creditMicros: 10_000_000, scopes: ['admin'] });
  client = new OpenAI({ baseURL: `${emulated.gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(() => emulated?.close());
afterEach(() => emulated.clearFaults());

const embed = (json: Record<string, unknown>) => call(emulated.gateway.baseUrl, '/v1/embeddings', { method: 'POST', json, headers: bearer(developer.key) });

async function walletMicros(): Promise<number> {
  const { rows } = await emulated.gateway.platform.db.query('SELECT balance_micros FROM wallets WHERE account_id = $1', [developer.accountId]);
  return Number(rows[0].balance_micros);
}

describe('POST /v1/embeddings', () => {
  it('passes with the official openai SDK (base64 by default), metered at the model price', async () => {
    const before = await walletMicros();
    const result = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['first text', 'second text'] });
    expect(result.data.map((item) => item.index)).toEqual([0, 1]);
    expect(result.data[0]!.embedding).toHaveLength(1536);
    expect(Math.hypot(...result.data[0]!.embedding)).toBeCloseTo(1, 4);
    expect(result.model).toBe('text-embedding-3-small');
    const model = catalogModel('svc:openai/text-embedding-3-small')!;
    expect(before - (await walletMicros())).toBe(Math.ceil((result.usage.prompt_tokens * model.inputMicrosPer1M) / 1e6));
  });

  it('routes each bare id to its provider, and shortens only the models that can', async () => {
    for (const [model, size] of [['embed-english-v3.0', 1024], ['text-embedding-004', 768], ['mistral-embed', 1024]] as const) {
      const response = await embed({ model, input: 'hello', encoding_format: 'float' });
      expect({ model, size: response.body.data?.[0]?.embedding.length }).toEqual({ model, size });
    }
    expect((await embed({ model: 'text-embedding-3-large', input: 'hello', dimensions: 256 })).body.data[0].embedding).toHaveLength(256);
    expect((await embed({ model: 'mistral-embed', input: 'hello', dimensions: 256 })).body.data[0].embedding).toHaveLength(1024);
    expect((await embed({ input: 'default model' })).body.model).toBe('text-embedding-3-small');
  });

  it.each([
    [{ model: 'text-embedding-3-small' }, 400, 'missing_input', 'input'],
    [{ model: 'text-embedding-3-small', input: [] }, 400, 'missing_input', 'input'],
    [{ model: 'text-embedding-3-small', input: [1, 2] }, 400, 'invalid_input', 'input'],
    [{ model: 'text-embedding-3-small', input: 'x'.repeat(100_001) }, 400, 'input_too_large', 'input'],
    [{ model: 'text-embedding-3-small', input: Array(2049).fill('a') }, 400, 'input_too_large', 'input'],
    [{ model: 'svc:openai/gpt-4o-mini', input: 'a' }, 400, 'invalid_embedding_model', 'model'],
    [{ model: 'no-such-embedding', input: 'a' }, 400, 'invalid_embedding_model', 'model'],
    [{ model: 'text-embedding-3-small', input: 'a', dimensions: 0 }, 400, 'invalid_dimensions', 'dimensions'],
    [{ model: 'text-embedding-3-small', input: 'a', dimensions: 4096 }, 400, 'invalid_dimensions', 'dimensions'],
    [{ model: 'voyage-3-lite', input: 'a' }, 503, 'platform_not_configured', undefined],
  ])('%j → %i %s', async (json, status, code, param) => {
    const before = await walletMicros();
    const response = await embed(json);
    expect({ status: response.status, code: response.body.error?.code, param: response.body.error?.param }).toEqual({ status, code, param });
    expect(await walletMicros()).toBe(before);
  });

  it('takes an embedding model in every form GET /v1/models shows, here and in a vector store', async () => {
    const listed = (await call(emulated.gateway.baseUrl, '/v1/models', { headers: bearer(developer.key) })).body.data.map((model: { id: string }) => model.id);
    expect(listed).toContain('svc:openai/text-embedding-3-small');
    for (const model of ['svc:openai/text-embedding-3-small', 'openai/text-embedding-3-small', 'text-embedding-3-small']) {
      const answer = await embed({ model, input: 'one form or another' });
      expect(answer.status, `${model}: ${answer.text}`).toBe(200);
      expect(answer.body.model).toBe('text-embedding-3-small');
    }
    const store = await call(emulated.gateway.baseUrl, '/v1/vector_stores', { method: 'POST', json: { name: 'catalog id', embedding_model: 'svc:openai/text-embedding-3-small' }, headers: bearer(developer.key) });
    expect(store.status, store.text).toBe(200);
    expect(store.body.embedding_model).toBe('text-embedding-3-small');
    const unknown = await call(emulated.gateway.baseUrl, '/v1/vector_stores', { method: 'POST', json: { name: 'no such model', embedding_model: 'svc:openai/gpt-4o-mini' }, headers: bearer(developer.key) });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: 'invalid_embedding_model', param: 'embedding_model' });
    expect(unknown.body.error.message).toContain('GET /v1/models');
  });

  it('503 upstream_unavailable when the provider keeps failing, nothing charged', async () => {
    await emulated.fault({ provider: 'openai', fault: { kind: 'status', status: 503 }, times: 10 });
    const before = await walletMicros();
    const response = await embed({ input: 'a' });
    expect({ status: response.status, code: response.body.error.code }).toEqual({ status: 503, code: 'upstream_unavailable' });
    expect(await walletMicros()).toBe(before);
  });
});
