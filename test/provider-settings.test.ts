import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CATALOG } from '../shared/models/catalog.js';
import { providerSettingsFromEnv, type ServiceAccountKey } from '../shared/providers/settings.js';
import { createEmulatorCredentials } from '../shared/emulator/core.js';
import { emulatorProviderEnv } from '../shared/emulator/provider-env.js';

const readServiceAccount = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as ServiceAccountKey;

describe('provider settings', () => {
  it('configure nothing without credentials, and use each SDK’s own variable names', () => {
    expect(providerSettingsFromEnv({}, readServiceAccount).size).toBe(0);
    const settings = providerSettingsFromEnv({ OPENAI_API_KEY: 'sk-1', CO_API_KEY: 'co-1', CO_API_URL: 'https://cohere.example/' }, readServiceAccount);
    expect(settings.get('openai')).toEqual({ kind: 'key', apiKey: 'sk-1', baseUrl: 'https://api.openai.com/v1' });
    expect(settings.get('cohere')).toEqual({ kind: 'key', apiKey: 'co-1', baseUrl: 'https://cohere.example' });
    expect(settings.has('anthropic')).toBe(false);
  });

  it('point all nineteen providers at the emulator through the same variables a deployment sets', () => {
    const providers = [...new Set(CATALOG.map((model) => model.provider))];
    const credentials = createEmulatorCredentials(providers);
    const env = emulatorProviderEnv('http://127.0.0.1:9999', credentials, mkdtempSync(path.join(os.tmpdir(), 'svc-emu-')));
    const settings = providerSettingsFromEnv(env, readServiceAccount);
    expect([...settings.keys()].sort()).toEqual([...providers].sort());
    expect(settings.get('bedrock')).toMatchObject({ kind: 'aws', baseUrl: 'http://127.0.0.1:9999/bedrock', accessKeyId: credentials.aws.accessKeyId });
    expect(settings.get('vertex')).toMatchObject({ kind: 'google_service_account', tokenUri: 'http://127.0.0.1:9999/vertex/token', projectId: 'emulator-project' });
    expect(settings.get('groq')).toEqual({ kind: 'key', apiKey: credentials.apiKeys.groq, baseUrl: 'http://127.0.0.1:9999/groq/openai/v1' });
  });
});

describe('the provider registry', () => {
  it('builds one adapter per configured provider, each answering a chat through the emulator', async () => {
    const { createFullEmulator } = await import('../shared/emulator/emulator.js');
    const { listen, serverUrl } = await import('../shared/platform/http-server.js');
    const { ProviderRegistry } = await import('../shared/providers/registry.js');
    const emulator = createFullEmulator();
    const server = await listen(emulator.app, 0, '127.0.0.1');
    try {
      const env = emulatorProviderEnv(serverUrl(server), emulator.credentials, mkdtempSync(path.join(os.tmpdir(), 'svc-emu-')));
      const registry = new ProviderRegistry(providerSettingsFromEnv(env, readServiceAccount));
      expect(registry.configured).toHaveLength(19);
      // One chat model of every provider that has one: the whole path from settings to the wire.
      const chatModels = CATALOG.filter((model) => model.kind === 'chat').filter((model, i, all) => all.findIndex((other) => other.provider === model.provider) === i);
      for (const model of chatModels) {
        const result = await registry.adapter(model.provider)!.chat!({
          model,
          upstreamModel: model.model,
          region: undefined,
          messages: [{ role: 'user', content: 'hello from the registry' }],
          maxTokens: 16,
          signal: new AbortController().signal,
        });
        expect({ provider: model.provider, answered: (result.content ?? '').length > 0, tokens: result.usage.inputTokens > 0 }).toEqual({ provider: model.provider, answered: true, tokens: true });
      }
      expect(chatModels.length).toBe(18);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
