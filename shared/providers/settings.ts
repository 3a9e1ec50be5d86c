/**
 * Where each provider lives and how the gateway authenticates to it, from environment variables
 * named as each provider's official SDK names them. A provider without credentials is simply not
 * configured: a call resolved to one of its models gets 503 platform_not_configured.
 */
export interface KeyProviderSettings {
  kind: 'key';
  baseUrl: string;
  apiKey: string;
}

export interface BedrockSettings {
  kind: 'aws';
  baseUrl: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface VertexSettings {
  kind: 'google_service_account';
  baseUrl: string;
  location: string;
  projectId: string;
  clientEmail: string;
  privateKeyPem: string;
  tokenUri: string;
}

export interface AzureSettings {
  kind: 'azure';
  endpoint: string;
  apiKey: string;
  apiVersion: string;
}

export interface WatsonxSettings {
  kind: 'ibm_iam';
  baseUrl: string;
  iamUrl: string;
  apiKey: string;
  projectId: string;
}

export type ProviderSettings = KeyProviderSettings | BedrockSettings | VertexSettings | AzureSettings | WatsonxSettings;

/** Key-and-base-URL providers: [provider, API key variable, base URL variable, default base URL]. */
export const KEY_PROVIDERS: ReadonlyArray<readonly [string, string, string, string]> = [
  ['openai', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'https://api.openai.com/v1'],
  ['groq', 'GROQ_API_KEY', 'GROQ_BASE_URL', 'https://api.groq.com/openai/v1'],
  ['together', 'TOGETHER_API_KEY', 'TOGETHER_BASE_URL', 'https://api.together.xyz/v1'],
  ['fireworks', 'FIREWORKS_API_KEY', 'FIREWORKS_BASE_URL', 'https://api.fireworks.ai/inference/v1'],
  ['deepseek', 'DEEPSEEK_API_KEY', 'DEEPSEEK_BASE_URL', 'https://api.deepseek.com/v1'],
  ['mistral', 'MISTRAL_API_KEY', 'MISTRAL_BASE_URL', 'https://api.mistral.ai/v1'],
  ['xai', 'XAI_API_KEY', 'XAI_BASE_URL', 'https://api.x.ai/v1'],
  ['perplexity', 'PERPLEXITY_API_KEY', 'PERPLEXITY_BASE_URL', 'https://api.perplexity.ai'],
  ['openrouter', 'OPENROUTER_API_KEY', 'OPENROUTER_BASE_URL', 'https://openrouter.ai/api/v1'],
  ['cerebras', 'CEREBRAS_API_KEY', 'CEREBRAS_BASE_URL', 'https://api.cerebras.ai/v1'],
  ['deepinfra', 'DEEPINFRA_API_KEY', 'DEEPINFRA_BASE_URL', 'https://api.deepinfra.com/v1/openai'],
  ['voyage', 'VOYAGE_API_KEY', 'VOYAGE_BASE_URL', 'https://api.voyageai.com/v1'],
  ['anthropic', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'https://api.anthropic.com'],
  ['gemini', 'GEMINI_API_KEY', 'GEMINI_BASE_URL', 'https://generativelanguage.googleapis.com'],
  ['cohere', 'CO_API_KEY', 'CO_API_URL', 'https://api.cohere.com'],
];

export interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  project_id: string;
  token_uri?: string;
}

/**
 * Reads every provider's settings. `readServiceAccount` loads GOOGLE_APPLICATION_CREDENTIALS
 * (a service-account JSON file); it is injected so this stays free of file I/O.
 */
export function providerSettingsFromEnv(env: NodeJS.ProcessEnv, readServiceAccount: (path: string) => ServiceAccountKey): Map<string, ProviderSettings> {
  const settings = new Map<string, ProviderSettings>();
  for (const [provider, keyVar, urlVar, defaultUrl] of KEY_PROVIDERS) {
    const apiKey = env[keyVar];
    if (apiKey) settings.set(provider, { kind: 'key', apiKey, baseUrl: trimSlash(env[urlVar] || defaultUrl) });
  }
  if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1';
    settings.set('bedrock', {
      kind: 'aws',
      region,
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      ...(env.AWS_SESSION_TOKEN && { sessionToken: env.AWS_SESSION_TOKEN }),
      baseUrl: trimSlash(env.BEDROCK_BASE_URL || `https://bedrock-runtime.${region}.amazonaws.com`),
    });
  }
  if (env.GOOGLE_APPLICATION_CREDENTIALS) {
    const account = readServiceAccount(env.GOOGLE_APPLICATION_CREDENTIALS);
    const location = env.VERTEX_LOCATION || 'us-east5';
    settings.set('vertex', {
      kind: 'google_service_account',
      location,
      projectId: env.VERTEX_PROJECT || account.project_id,
      clientEmail: account.client_email,
      privateKeyPem: account.private_key,
      tokenUri: account.token_uri || 'https://oauth2.googleapis.com/token',
      baseUrl: trimSlash(env.VERTEX_BASE_URL || `https://${location}-aiplatform.googleapis.com`),
    });
  }
  if (env.AZURE_OPENAI_API_KEY && env.AZURE_OPENAI_ENDPOINT) {
    settings.set('azure', { kind: 'azure', apiKey: env.AZURE_OPENAI_API_KEY, endpoint: trimSlash(env.AZURE_OPENAI_ENDPOINT), apiVersion: env.OPENAI_API_VERSION || '2024-10-21' });
  }
  if (env.WATSONX_APIKEY && env.WATSONX_PROJECT_ID) {
    settings.set('watsonx', {
      kind: 'ibm_iam',
      apiKey: env.WATSONX_APIKEY,
      projectId: env.WATSONX_PROJECT_ID,
      baseUrl: trimSlash(env.WATSONX_URL || 'https://us-south.ml.cloud.ibm.com'),
      iamUrl: trimSlash(env.WATSONX_IAM_URL || 'https://iam.cloud.ibm.com'),
    });
  }
  return settings;
}

const trimSlash = (url: string) => url.replace(/\/+$/, '');
