/**
 * The wire formats this gateway mirrors, for GET /v1/compatibility. Which surfaces are available,
 * and under which paths, is derived from the routes actually mounted (api/route-table.ts): a
 * surface is `available` when it has routes, and the roadmap's surfaces not yet built are listed
 * as `planned` until their routes land.
 */
export interface CompatibleSurface {
  surface: string;
  compatible_with: string;
  paths: string[];
  status: 'available' | 'planned';
  notes?: string;
}

interface SurfaceInfo {
  compatible_with: string;
  notes?: string;
}

/** What each surface mirrors; every route's `surface` must be a key here. */
export const SURFACES: Record<string, SurfaceInfo> = {
  'chat.completions': { compatible_with: 'openai.chat.completions', notes: 'model takes typed refs (svc:, match:, slot:, dyn:) or a cascade array; SSE chunks when stream is true' },
  embeddings: { compatible_with: 'openai.embeddings' },
  moderations: { compatible_with: 'openai.moderations' },
  rerank: { compatible_with: 'cohere.rerank.v2' },
  models: { compatible_with: 'openai.models' },
  images: { compatible_with: 'openai.images.generations' },
  'audio.transcriptions': { compatible_with: 'openai.audio.transcriptions' },
  'audio.speech': { compatible_with: 'openai.audio.speech' },
  files: { compatible_with: 'openai.files' },
  batches: { compatible_with: 'openai.batches' },
  assistants: { compatible_with: 'openai.beta.assistants', notes: 'Assistants v2: assistants, threads, messages, runs (Temporal workflows), steps, submit_tool_outputs, file_search over vector stores' },
  conversations: { compatible_with: 'svc.conversations', notes: "a customer's conversations: turns through the chat path under a lock (Redis, TTL, fencing token)" },
  vector_stores: { compatible_with: 'openai.vector_stores', notes: 'plus embedding_model, encryption (managed, byok), vector_sealing, vector_index, graphrag_enabled; unlock and hybrid search' },
  brains: { compatible_with: 'svc.brains', notes: 'spec 2: entries versioned bi-temporally (recall as_of), composite recall with explain and misses; encryption none, standard, strict' },
  packs: { compatible_with: 'svc.packs', notes: 'spec 2: immutable pack versions published from brains (secret scan, size gate), grants, and mounts (reference or materialize) into other brains' },
  customers: { compatible_with: 'svc.customers' },
  client_tokens: { compatible_with: 'svc.client_tokens' },
  customer_wallets: { compatible_with: 'svc.customer_wallets' },
  usage_reports: { compatible_with: 'svc.usage' },
  balance: { compatible_with: 'svc.balance' },
  accounts: { compatible_with: 'svc.provisioned_accounts' },
  model_slots: { compatible_with: 'svc.model_slots' },
  dynamic_profiles: { compatible_with: 'svc.dynamic_profiles' },
  webhooks: { compatible_with: 'svc.webhooks', notes: 'Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature)' },
  system: { compatible_with: 'svc.system', notes: 'health, this document, and the OpenAPI 3.1 description at /v1/openapi.json' },
};

/** On the published roadmap, not yet mounted. */
const PLANNED: CompatibleSurface[] = [
  { surface: 'brains', compatible_with: 'svc.brains', paths: ['/v1/brains'], status: 'planned' },
  { surface: 'packs', compatible_with: 'svc.packs', paths: ['/v1/packs'], status: 'planned' },
];

/** Conventions every route follows. */
const CROSS_CUTTING: CompatibleSurface[] = [
  { surface: 'errors', compatible_with: 'openai.errors', paths: ['*'], status: 'available', notes: 'every non-2xx body is {error:{type,code,message,param?,retry_after_seconds?}}' },
  { surface: 'request_id', compatible_with: 'openai.x-request-id', paths: ['*'], status: 'available', notes: 'X-Request-Id on every response; a caller-supplied value is echoed' },
];

/** "POST /v1/files/{id}" for a route mounted as post /v1/files/:id. */
export const describeRoute = (route: { method: string; path: string }) => `${route.method.toUpperCase()} ${openApiPath(route.path)}`;

/** Express's /v1/files/:id as OpenAPI's /v1/files/{id}. */
export const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}');

export function compatibleSurfaces(routes: ReadonlyArray<{ method: string; path: string; surface: string }>): CompatibleSurface[] {
  const mounted = new Map<string, string[]>();
  for (const route of routes) {
    if (!(route.surface in SURFACES)) throw new Error(`route ${describeRoute(route)} names an unknown surface ${route.surface}`);
    mounted.set(route.surface, [...(mounted.get(route.surface) ?? []), describeRoute(route)]);
  }
  const available = [...mounted].map(([surface, paths]): CompatibleSurface => ({ surface, ...SURFACES[surface]!, paths, status: 'available' }));
  return [...available, ...PLANNED.filter((planned) => !mounted.has(planned.surface)), ...CROSS_CUTTING];
}
