import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deterministicEmbedding, relevance } from '../shared/emulator/embeddings.js';
import { stem, tokenize } from '../shared/emulator/text-features.js';
import { CATALOG } from '../shared/models/catalog.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/** Questions a user asks, each with the one document that answers it; the documents share words, not strings. */
const PAIRS: Array<[query: string, document: string]> = [
  ['reset my password', 'How do I reset a password I have forgotten? Use the reset link on the sign-in page.'],
  ['cancel my subscription', 'To cancel a subscription, open billing settings and choose cancel plan.'],
  ['refund for a double charge', 'If you were charged twice, we refund the duplicate charge within five days.'],
  ['change the email address on my account', 'You can change the email address of your account under profile settings.'],
  ['export data as csv', 'Reports can be exported as CSV files from the data export menu.'],
  ['two factor authentication setup', 'Set up two-factor authentication with an authenticator app in security settings.'],
  ['invite a teammate to the workspace', 'Workspace owners invite teammates by email from the members page.'],
  ['delete my account permanently', 'Deleting an account is permanent: all projects and files are removed.'],
  ['api rate limits per minute', 'The API allows 3,000 requests per minute per key; limits reset every minute.'],
  ['webhook signature verification', 'Verify each webhook signature with the signing secret before trusting the payload.'],
  ['upload a large file', 'Large files upload in parts; a file may be up to 512 MB.'],
  ['batch job stuck in progress', 'A batch stays in progress while its lines run; check the batch status for counts.'],
  ['translate the document to french', 'The assistant can translate documents into French, German and Spanish.'],
  ['weather forecast for tomorrow', 'Tomorrow the forecast shows rain in the morning and sun after noon.'],
  ['recipe for chocolate cake', 'This chocolate cake recipe needs flour, cocoa, eggs and sugar.'],
  ['train schedule to the airport', 'Trains to the airport leave every twenty minutes; see the schedule below.'],
  ['best hiking trails nearby', 'Nearby hiking trails range from easy walks to steep mountain paths.'],
  ['how to water tomato plants', 'Water tomato plants deeply twice a week, at the roots, in the morning.'],
  ['rotate the signing key', 'Rotating a signing key keeps the old key valid during a grace period.'],
  ['customer wallet top up', 'Top up a customer wallet by moving funds from the developer wallet.'],
  ['streaming chat completions', 'Set stream to true and chat completions arrive as server-sent event chunks.'],
  ['model fallback cascade', 'A cascade of models falls back to the next model when a provider fails.'],
  ['monthly invoice pdf', 'Each monthly invoice is available as a PDF in the billing history.'],
  ['guitar lessons for beginners', 'Beginner guitar lessons start with chords, strumming and simple songs.'],
];

const EMBEDDING_MODELS = CATALOG.filter((model) => model.kind === 'embedding');

const cosine = (a: number[], b: number[]) => a.reduce((sum, value, i) => sum + value * b[i]!, 0);

let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper());
});
afterAll(() => emulated?.close());

async function embed(model: string, input: string[], dimensions?: number): Promise<number[][]> {
  const response = await call(gateway.baseUrl, '/v1/embeddings', {
    method: 'POST',
    headers: bearer(developer.key),
    json: { model, input, encoding_format: 'float', ...(dimensions && { dimensions }) },
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body.data.map((item: { embedding: number[] }) => item.embedding);
}

/** For each query, the index of the document its embedding is nearest to. */
function nearest(queries: number[][], documents: number[][]): number[] {
  return queries.map((query) => {
    const scores = documents.map((document) => cosine(query, document));
    return scores.indexOf(Math.max(...scores));
  });
}

describe('the emulator embeddings carry meaning', () => {
  it('the stemmer meets the forms a user writes', () => {
    expect(stem('passwords')).toBe(stem('password'));
    expect(stem('resetting')).toBe(stem('reset'));
    expect(stem('exported')).toBe(stem('export'));
    expect(stem('trails')).toBe(stem('trail'));
    expect(tokenize('Two-factor, AUTH!')).toEqual(['two', 'factor', 'auth']);
  });

  it('ranks the answering document first for each of the 24 queries, for all nine models at their own dimensions', async () => {
    expect(EMBEDDING_MODELS).toHaveLength(9);
    const queries = PAIRS.map(([query]) => query);
    const documents = PAIRS.map(([, document]) => document);
    for (const model of EMBEDDING_MODELS) {
      const [queryVectors, documentVectors] = [await embed(model.model, queries), await embed(model.model, documents)];
      expect(queryVectors[0], model.model).toHaveLength(model.dimensions!);
      expect(Math.hypot(...queryVectors[0]!)).toBeCloseTo(1, 6);
      expect(nearest(queryVectors, documentVectors), model.model).toEqual(PAIRS.map((_, i) => i));
    }
  });

  it('scores related texts clearly above unrelated ones', () => {
    const vectors = PAIRS.map(([query, document]) => [deterministicEmbedding('text-embedding-3-small', query, 1536), deterministicEmbedding('text-embedding-3-small', document, 1536)] as const);
    const related = vectors.map(([query, document]) => cosine(query, document));
    const unrelated = vectors.flatMap(([query], i) => vectors.filter((_, j) => j !== i).map(([, document]) => cosine(query, document)));
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    expect(Math.min(...related)).toBeGreaterThan(0.2);
    expect(mean(related)).toBeGreaterThan(mean(unrelated) + 0.3);
  });

  it('is deterministic, differs between models, and shortened vectors rank the same', async () => {
    const [first] = await embed('text-embedding-3-small', ['reset my password']);
    const [again] = await embed('text-embedding-3-small', ['reset my password']);
    expect(again).toEqual(first);
    const [large] = await embed('text-embedding-3-large', ['reset my password']);
    expect(cosine(first!.slice(0, 1536), large!.slice(0, 1536))).toBeLessThan(0.5);

    const queries = PAIRS.map(([query]) => query);
    const documents = PAIRS.map(([, document]) => document);
    for (const [model, dimensions] of [['text-embedding-3-small', 256], ['text-embedding-3-large', 512]] as const) {
      const queryVectors = await embed(model, queries, dimensions);
      expect(queryVectors[0]).toHaveLength(dimensions);
      expect(Math.hypot(...queryVectors[0]!)).toBeCloseTo(1, 6);
      expect(nearest(queryVectors, await embed(model, documents, dimensions))).toEqual(PAIRS.map((_, i) => i));
    }
  });

  it('rerank puts the answering document first', async () => {
    const documents = PAIRS.map(([, document]) => document);
    for (const [i, [query]] of PAIRS.entries()) {
      expect(relevance(query, documents[i]!)).toBeGreaterThan(0);
      const ranked = documents.map((document, index) => ({ index, score: relevance(query, document) })).sort((a, b) => b.score - a.score);
      expect(ranked[0]!.index, query).toBe(i);
    }
    const response = await call(gateway.baseUrl, '/v1/rerank', { method: 'POST', headers: bearer(developer.key), json: { model: 'svc:cohere/rerank-v3.5', query: PAIRS[0]![0], documents, top_n: 3 } });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.results[0].index).toBe(0);
  });
});
