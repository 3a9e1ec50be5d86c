import { z } from 'zod';
import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { serviceError } from '../errors.js';
import { newId } from '../ids.js';
import { CATALOG, catalogModel, type CatalogModel } from '../models/catalog.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { ProviderAdapter } from '../providers/types.js';
import { callUpstream } from './upstream-call.js';

/**
 * POST /v1/rerank, up to the provider call: exactly the four rerank references, the spec's
 * limits checked before anything is called, one search unit billed per call.
 */
const MAX_DOCUMENTS = 1_000;
const MAX_QUERY_CHARACTERS = 10_000;
const MAX_DOCUMENT_CHARACTERS = 100_000;

export const rerankBody = z.object({
  model: z.unknown().optional(),
  query: z.string({ error: 'query must be a string' }),
  documents: z.unknown().optional(),
  top_n: z.int32().positive().optional(),
  return_documents: z.boolean().optional(),
});

export interface RerankPlan {
  model: CatalogModel;
  adapter: ProviderAdapter;
  query: string;
  documents: string[];
  topN: number | undefined;
  returnDocuments: boolean;
}

/** Plans a request parsed by rerankBody. */
export function planRerank(request: z.output<typeof rerankBody>, providers: ProviderRegistry): RerankPlan {
  const { model: ref, query, documents, top_n, return_documents } = request;
  const model = typeof ref === 'string' ? catalogModel(ref.split('@')[0]!) : undefined;
  if (!model || model.kind !== 'rerank' || ref !== model.id) {
    const accepted = CATALOG.filter((entry) => entry.kind === 'rerank').map((entry) => entry.id);
    throw serviceError('unsupported_rerank_model', { param: 'model', message: `model must be one of: ${accepted.join(', ')}.` });
  }
  if (query.length > MAX_QUERY_CHARACTERS) throw serviceError('query_too_large', { param: 'query' });
  if (!Array.isArray(documents) || documents.length === 0) throw serviceError('missing_documents', { param: 'documents' });
  if (documents.length > MAX_DOCUMENTS) throw serviceError('too_many_documents', { param: 'documents' });
  // The common rerank shape takes plain strings, or objects carrying their text.
  const texts = documents.map((document, i) => {
    const text = typeof document === 'string' ? document : (document as { text?: unknown } | null)?.text;
    if (typeof text !== 'string') throw serviceError('invalid_request', { param: `documents.${i}`, message: 'A document is a string or an object with a text string.' });
    if (text.length > MAX_DOCUMENT_CHARACTERS) throw serviceError('document_too_large', { param: `documents.${i}` });
    return text;
  });
  const adapter = providers.adapter(model.provider);
  if (!adapter?.rerank) throw serviceError('platform_not_configured', { message: `No upstream credentials are configured for ${model.provider} (needed by ${model.model}).` });
  return { model, adapter, query, documents: texts, topN: top_n, returnDocuments: return_documents === true };
}

/** One rerank call, billed as one search unit at the model's price; the common rerank wire shape. */
export async function rerank(platform: Pick<GatewayServices, 'db' | 'config' | 'limiter' | 'meteringTimings' | 'grants'>, call: MeteredCall, plan: RerankPlan, signal: AbortSignal) {
  const searchUnitMicros = plan.model.inputMicrosPer1M;
  const settled = await callUpstream(platform, call, {
    surface: 'rerank',
    reserveMicros: searchUnitMicros,
    signal,
    attempt: () => plan.adapter.rerank!({ model: plan.model, upstreamModel: plan.model.model, query: plan.query, documents: plan.documents, topN: plan.topN, signal }),
    meter: () => ({ model: plan.model.id, costMicros: searchUnitMicros, tokensIn: 0, tokensOut: 0 }),
  });
  return {
    body: {
      id: newId('rerank_'),
      results: settled.result.results.map((entry) => ({
        index: entry.index,
        relevance_score: entry.relevanceScore,
        ...(plan.returnDocuments && { document: { text: plan.documents[entry.index] } }),
      })),
      meta: { billed_units: { search_units: 1 } },
    },
    deductedMicros: settled.deductedMicros,
    balanceAfterMicros: settled.balanceAfterMicros,
  };
}
