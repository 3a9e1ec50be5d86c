import { CATALOG } from '../models/catalog.js';
import { createEmulatorCredentials, type EmulatorCredentials, type EmulatorOptions } from './core.js';
import { createEmulatorApp } from './server.js';
import { customTransportStyles } from './styles/custom-transports.js';
import { nativeStyles } from './styles/native.js';
import { openAiCompatibleStyle } from './styles/openai-compatible.js';

/** Every provider of the catalog, in all three wire styles, on one HTTP server. */
export function createFullEmulator(options: Partial<Omit<EmulatorOptions, 'credentials'>> & { credentials?: EmulatorCredentials } = {}) {
  const providers = [...new Set(CATALOG.map((model) => model.provider))];
  const credentials = options.credentials ?? createEmulatorCredentials(providers);
  const emulator = createEmulatorApp(
    { credentials, latencyMs: options.latencyMs ?? 0, chunkIntervalMs: options.chunkIntervalMs ?? 0 },
    [openAiCompatibleStyle, ...nativeStyles, ...customTransportStyles],
  );
  return { ...emulator, credentials };
}
