import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { KEY_PROVIDERS } from '../providers/settings.js';
import type { EmulatorCredentials } from './core.js';

/**
 * The environment that points every provider at a running emulator, in the same variables a real
 * deployment sets (OPENAI_API_KEY / OPENAI_BASE_URL, AWS_*, GOOGLE_APPLICATION_CREDENTIALS, ...).
 * The Vertex service account is written as the JSON key file Google's tools expect.
 */
const BASE_PATHS: Record<string, string> = {
  openai: '/openai/v1',
  groq: '/groq/openai/v1',
  together: '/together/v1',
  fireworks: '/fireworks/inference/v1',
  deepseek: '/deepseek/v1',
  mistral: '/mistral/v1',
  xai: '/xai/v1',
  perplexity: '/perplexity',
  openrouter: '/openrouter/api/v1',
  cerebras: '/cerebras/v1',
  deepinfra: '/deepinfra/v1/openai',
  voyage: '/voyage/v1',
  anthropic: '/anthropic',
  gemini: '/gemini',
  cohere: '/cohere',
};

export function emulatorProviderEnv(url: string, credentials: EmulatorCredentials, dataDir: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [provider, keyVar, urlVar] of KEY_PROVIDERS) {
    env[keyVar] = credentials.apiKeys[provider]!;
    env[urlVar] = `${url}${BASE_PATHS[provider]}`;
  }
  const serviceAccountFile = path.join(dataDir, 'emulator-service-account.json');
  writeFileSync(
    serviceAccountFile,
    JSON.stringify({
      type: 'service_account',
      project_id: credentials.googleServiceAccount.projectId,
      client_email: credentials.googleServiceAccount.clientEmail,
      private_key: credentials.googleServiceAccount.privateKeyPem,
      token_uri: `${url}/vertex/token`,
    }),
    { mode: 0o600 },
  );
  return {
    ...env,
    AWS_ACCESS_KEY_ID: credentials.aws.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.aws.secretAccessKey,
    AWS_REGION: credentials.aws.region,
    BEDROCK_BASE_URL: `${url}/bedrock`,
    GOOGLE_APPLICATION_CREDENTIALS: serviceAccountFile,
    VERTEX_BASE_URL: `${url}/vertex`,
    VERTEX_LOCATION: 'us-east5',
    AZURE_OPENAI_API_KEY: credentials.apiKeys.azure!,
    AZURE_OPENAI_ENDPOINT: `${url}/azure`,
    OPENAI_API_VERSION: '2024-10-21',
    WATSONX_APIKEY: credentials.ibmApiKey,
    WATSONX_PROJECT_ID: 'emulator-project',
    WATSONX_URL: `${url}/watsonx`,
    WATSONX_IAM_URL: `${url}/watsonx`,
  };
}
