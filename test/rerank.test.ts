import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGateway, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper } from './support/test-platform.js';

let emulated: EmulatedGateway;
let developer: TestDeveloper;

beforeAll(async () => {
  emulated = await startEmulatedGateway();
  // Rerank is open to any valid key, whatever its scopes.
  developer = await createDeveloper(emulated.gateway.platform, { creditMicros: 1_000_000, scopes: ['api:read'] });
});
afterAll(() => emulated?.close());

const rerank = (json: Record<string, unknown>, headers: Record<string, string> = bearer(developer.key)) =>
  call(emulated.gateway.baseUrl, '/v1/rerank', { method: 'POST', json, headers });
const documents = ['the cat sat on the mat', 'stock markets fell today', 'a cat and a dog play', 'weather is sunny'];

async function walletMicros(): Promise<number> {
  const { rows } = await emulated.gateway.platform.db.query('SELECT balance_micros FROM wallets WHERE account_id = $1', [developer.accountId]);
  return Number(rows[0].balance_micros);
}

describe('POST /v1/rerank', () => {
  it.each([['svc:cohere/rerank-v3.5', 2_000], ['svc:voyage/rerank-2-lite', 200]])('ranks with %s, billed as one search unit', async (model, searchMicros) => {
    const before = await walletMicros();
    const response = await rerank({ model, query: 'cat', documents, top_n: 2, return_documents: true });
    expect(response.status).toBe(200);
    expect(response.body.results).toHaveLength(2);
    expect(response.body.results[0].relevance_score).toBeGreaterThanOrEqual(response.body.results[1].relevance_score);
    expect(response.body.results.map((result: { index: number }) => result.index).sort()).toEqual([0, 2]);
    expect(response.body.results[0].document.text).toBe(documents[response.body.results[0].index]);
    expect(response.body.meta).toEqual({ billed_units: { search_units: 1 } });
    expect(before - (await walletMicros())).toBe(searchMicros);
  });

  it('accepts documents as objects with text, and leaves documents out unless asked', async () => {
    const response = await rerank({ model: 'svc:cohere/rerank-multilingual-v3.0', query: 'weather', documents: documents.map((text) => ({ text })) });
    expect(response.body.results).toHaveLength(4);
    expect(response.body.results[0]).not.toHaveProperty('document');
  });

  it.each([
    [{ model: 'svc:cohere/rerank-english-v2.0', query: 'q', documents }, 'unsupported_rerank_model', 'model'],
    [{ model: 'rerank-v3.5', query: 'q', documents }, 'unsupported_rerank_model', 'model'],
    [{ model: 'svc:openai/gpt-4o', query: 'q', documents }, 'unsupported_rerank_model', 'model'],
    [{ model: 'svc:cohere/rerank-v3.5', query: 'q' }, 'missing_documents', 'documents'],
    [{ model: 'svc:cohere/rerank-v3.5', query: 'q', documents: [] }, 'missing_documents', 'documents'],
    [{ model: 'svc:cohere/rerank-v3.5', query: 'q', documents: Array(1001).fill('d') }, 'too_many_documents', 'documents'],
    [{ model: 'svc:cohere/rerank-v3.5', query: 'q'.repeat(10_001), documents }, 'query_too_large', 'query'],
    [{ model: 'svc:cohere/rerank-v3.5', query: 'q', documents: ['d'.repeat(100_001)] }, 'document_too_large', 'documents.0'],
  ])('%j → 400 %s', async (json, code, param) => {
    const before = await walletMicros();
    const response = await rerank(json);
    expect({ status: response.status, code: response.body.error?.code, param: response.body.error?.param }).toEqual({ status: 400, code, param });
    expect(await walletMicros()).toBe(before);
  });

  it('is not reachable with a client token', async () => {
    const response = await rerank({ model: 'svc:cohere/rerank-v3.5', query: 'q', documents }, { Authorization: 'Client a.b.c' });
    expect({ status: response.status, code: response.body.error.code }).toEqual({ status: 403, code: 'endpoint_not_allowed_for_client_token' });
  });
});
