import { createAnthropicAdapter } from './anthropic.js';
import { createAzureAdapter } from './azure.js';
import { createBedrockAdapter } from './bedrock.js';
import { createCohereAdapter } from './cohere.js';
import { createGeminiAdapter } from './gemini.js';
import { createOpenAiCompatibleAdapter } from './openai-compatible.js';
import type { ProviderSettings } from './settings.js';
import type { ProviderAdapter } from './types.js';
import { createVertexAdapter } from './vertex.js';
import { createWatsonxAdapter } from './watsonx.js';

/**
 * The one registry: each configured provider's adapter, built once from its settings. A provider
 * missing here is not configured (503 platform_not_configured for its models).
 */
const NATIVE: Record<string, (settings: Extract<ProviderSettings, { kind: 'key' }>) => ProviderAdapter> = {
  anthropic: createAnthropicAdapter,
  gemini: createGeminiAdapter,
  cohere: createCohereAdapter,
};

export class ProviderRegistry {
  private readonly adapters = new Map<string, ProviderAdapter>();

  constructor(settings: ReadonlyMap<string, ProviderSettings>) {
    for (const [provider, setting] of settings) this.adapters.set(provider, createAdapter(provider, setting));
  }

  adapter(provider: string): ProviderAdapter | undefined {
    return this.adapters.get(provider);
  }

  get configured(): string[] {
    return [...this.adapters.keys()];
  }
}

function createAdapter(provider: string, settings: ProviderSettings): ProviderAdapter {
  switch (settings.kind) {
    case 'key':
      return (NATIVE[provider] ?? ((key) => createOpenAiCompatibleAdapter(provider, key)))(settings);
    case 'aws':
      return createBedrockAdapter(settings);
    case 'google_service_account':
      return createVertexAdapter(settings);
    case 'azure':
      return createAzureAdapter(settings);
    case 'ibm_iam':
      return createWatsonxAdapter(settings);
  }
}
