import { z } from 'zod';
import { countTokens, deterministicEmbedding, relevance } from '../../core.js';
import { invalidRequest } from './errors.js';
import { parseBody, type Endpoint } from './endpoint.js';

/**
 * `POST .../embeddings` (OpenAI's shape; Voyage's is the same list with `usage: {total_tokens}`)
 * and Voyage's `POST /rerank`.
 */

const EmbeddingRequest = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(z.string()).min(1)]),
  dimensions: z.number().int().positive().nullish(),
  output_dimension: z.number().int().positive().nullish(),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  input_type: z.enum(['query', 'document']).nullish(),
});

/** Voyage prepends these to inputs with an input_type, so query and document vectors differ. */
const VOYAGE_INPUT_PROMPTS = {
  query: 'Represent the query for retrieving supporting documents: ',
  document: 'Represent the document for retrieval: ',
} as const;

/** The openai SDK asks for base64 by default: little-endian float32, as upstream encodes it. */
function toBase64(vector: number[]): string {
  const buffer = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => buffer.writeFloatLE(value, i * 4));
  return buffer.toString('base64');
}

export const embeddings: Endpoint = {
  path: '/embeddings',
  kind: 'embedding',
  handle({ res, provider, model, body }) {
    const request = parseBody(EmbeddingRequest, body);
    const inputs = typeof request.input === 'string' ? [request.input] : request.input;
    const requested = request.dimensions ?? request.output_dimension ?? undefined;
    if (requested !== undefined && !model.shortenable) {
      throw invalidRequest('This model does not support specifying dimensions.', request.dimensions ? 'dimensions' : 'output_dimension');
    }
    if (requested !== undefined && requested > model.dimensions!) {
      throw invalidRequest(`The requested dimensions (${requested}) exceed the model's ${model.dimensions}.`, 'dimensions');
    }
    const prefix = request.input_type ? VOYAGE_INPUT_PROMPTS[request.input_type] : '';
    const data = inputs.map((input, index) => {
      const vector = deterministicEmbedding(model.model, `${prefix}${input}`, requested ?? model.dimensions!);
      return { object: 'embedding', index, embedding: request.encoding_format === 'base64' ? toBase64(vector) : vector };
    });
    const tokens = inputs.reduce((sum, input) => sum + countTokens(input), 0);
    const usage = provider === 'voyage' ? { total_tokens: tokens } : { prompt_tokens: tokens, total_tokens: tokens };
    res.json({ object: 'list', data, model: model.model, usage });
  },
};

const RerankRequest = z.looseObject({
  model: z.string(),
  query: z.string(),
  documents: z.array(z.string()).min(1),
  top_k: z.number().int().positive().nullish(),
  return_documents: z.boolean().nullish(),
});

export const rerank: Endpoint = {
  path: '/rerank',
  kind: 'rerank',
  handle({ res, model, body }) {
    const request = parseBody(RerankRequest, body);
    const ranked = request.documents
      .map((document, index) => ({ index, relevance_score: relevance(request.query, document), ...(request.return_documents ? { document } : {}) }))
      // Ties keep input order, so the answer is the same every time.
      .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
      .slice(0, request.top_k ?? undefined);
    const tokens = countTokens(request.query) * request.documents.length + request.documents.reduce((sum, document) => sum + countTokens(document), 0);
    res.json({ object: 'list', data: ranked, model: model.model, usage: { total_tokens: tokens } });
  },
};
