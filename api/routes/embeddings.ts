import { Router } from 'express';
import { runMeteredCall } from '../../shared/billing/metered-call.js';
import { encodeEmbedding, maxEmbeddingTokens, planEmbeddings } from '../../shared/inference/embeddings.js';
import { translateUpstream, withRetries } from '../../shared/inference/chat.js';
import { costMicros } from '../../shared/inference/pricing.js';
import type { Platform } from '../../shared/platform/platform.js';
import { abortWhenClientLeaves, meteredCall, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';

const CALL_DEADLINE_MS = 60_000;

export function embeddingRoutes(platform: Platform): Router {
  const router = Router();
  router.post('/v1/embeddings', meteredCall(platform, { developer: 'api:chat', clientToken: 'embeddings' }), async (req, res) => {
    const plan = planEmbeddings(req.body, platform.providers);
    const call = meteredCallOf(req);
    const signal = abortWhenClientLeaves(res);
    const maxCost = costMicros(plan.model, { inputTokens: maxEmbeddingTokens(plan.input), outputTokens: 0 });
    const settled = await runMeteredCall(platform, { ...call, requestId: String(req.id) }, maxCost, async () => {
      const result = await withRetries(
        () => plan.adapter.embeddings!({ model: plan.model, upstreamModel: plan.model.model, input: plan.input, ...(plan.dimensions && { dimensions: plan.dimensions }), signal: signal }),
        Date.now() + CALL_DEADLINE_MS,
        signal,
      );
      return { result, model: plan.model.id, costMicros: costMicros(plan.model, { inputTokens: result.usage.inputTokens, outputTokens: 0 }), tokensIn: result.usage.inputTokens, tokensOut: 0 };
    }).catch((error: unknown) => {
      throw translateUpstream(error);
    });
    setWalletHeaders(res, settled);
    res.json({
      object: 'list',
      data: settled.result.embeddings.map((vector, index) => ({ object: 'embedding', index, embedding: encodeEmbedding(vector, plan.encoding) })),
      model: plan.model.model,
      usage: { prompt_tokens: settled.result.usage.inputTokens, total_tokens: settled.result.usage.inputTokens },
    });
  });
  return router;
}
