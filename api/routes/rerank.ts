import { Router } from 'express';
import { runMeteredCall } from '../../shared/billing/metered-call.js';
import { newId } from '../../shared/ids.js';
import { translateUpstream, withRetries } from '../../shared/inference/chat.js';
import { planRerank } from '../../shared/inference/rerank.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

const CALL_DEADLINE_MS = 60_000;

/** The common rerank wire shape; billed as one search unit. Any valid key; not for client tokens. */
export function rerankRoutes(platform: GatewayServices): Router {
  const router = Router();
  router.post('/v1/rerank', meteredCall(platform, { developer: 'any', clientToken: null }), async (req, res) => {
    const plan = planRerank(req.body, platform.providers);
    const signal = abortWhenClientLeaves(res);
    const searchUnitMicros = plan.model.inputMicrosPer1M;
    const settled = await runMeteredCall(platform, meteredCallOf(req), searchUnitMicros, async () => {
      const result = await withRetries(
        () => plan.adapter.rerank!({ model: plan.model, upstreamModel: plan.model.model, query: plan.query, documents: plan.documents, topN: plan.topN, signal: signal }),
        Date.now() + CALL_DEADLINE_MS,
        signal,
      );
      return { result, model: plan.model.id, costMicros: searchUnitMicros, tokensIn: 0, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    setWalletHeaders(res, settled);
    res.json({
      id: newId('rerank_'),
      results: settled.result.results.map((entry) => ({
        index: entry.index,
        relevance_score: entry.relevanceScore,
        ...(plan.returnDocuments && { document: { text: plan.documents[entry.index] } }),
      })),
      meta: { billed_units: { search_units: 1 } },
    });
  });
  return router;
}
