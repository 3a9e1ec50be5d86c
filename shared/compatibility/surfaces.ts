/**
 * The wire formats this gateway mirrors, for GET /v1/compatibility. `status` tells a client
 * whether a surface answers today ("available") or is on the published roadmap ("planned");
 * each surface flips to available in the change that implements it.
 */
export interface CompatibleSurface {
  surface: string;
  compatible_with: string;
  paths: string[];
  status: 'available' | 'planned';
  notes?: string;
}

export const COMPATIBLE_SURFACES: readonly CompatibleSurface[] = [
  { surface: 'chat.completions', compatible_with: 'openai.chat.completions', paths: ['POST /v1/chat/completions'], status: 'available', notes: 'model takes typed refs (svc:, match:, slot:, dyn:) or a cascade array; SSE chunks when stream is true' },
  { surface: 'embeddings', compatible_with: 'openai.embeddings', paths: ['POST /v1/embeddings'], status: 'available' },
  { surface: 'moderations', compatible_with: 'openai.moderations', paths: ['POST /v1/moderations'], status: 'available' },
  { surface: 'rerank', compatible_with: 'cohere.rerank.v2', paths: ['POST /v1/rerank'], status: 'available' },
  { surface: 'models', compatible_with: 'openai.models', paths: ['GET /v1/models'], status: 'available' },
  { surface: 'files', compatible_with: 'openai.files', paths: ['POST /v1/files', 'GET /v1/files', 'GET /v1/files/{id}', 'GET /v1/files/{id}/content', 'DELETE /v1/files/{id}'], status: 'planned' },
  { surface: 'batches', compatible_with: 'openai.batches', paths: ['POST /v1/batches', 'GET /v1/batches', 'GET /v1/batches/{id}', 'POST /v1/batches/{id}/cancel'], status: 'planned' },
  { surface: 'vector_stores', compatible_with: 'openai.vector_stores', paths: ['/v1/vector_stores'], status: 'planned' },
  { surface: 'assistants', compatible_with: 'openai.beta.assistants', paths: ['/v1/assistants', '/v1/threads'], status: 'planned' },
  { surface: 'images', compatible_with: 'openai.images.generations', paths: ['POST /v1/images/generations'], status: 'available' },
  { surface: 'audio.transcriptions', compatible_with: 'openai.audio.transcriptions', paths: ['POST /v1/audio/transcriptions'], status: 'available' },
  { surface: 'audio.speech', compatible_with: 'openai.audio.speech', paths: ['POST /v1/audio/speech'], status: 'available' },
  { surface: 'errors', compatible_with: 'openai.errors', paths: ['*'], status: 'available', notes: 'every non-2xx body is {error:{type,code,message,param?,retry_after_seconds?}}' },
  { surface: 'request_id', compatible_with: 'openai.x-request-id', paths: ['*'], status: 'available', notes: 'X-Request-Id on every response; a caller-supplied value is echoed' },
];
