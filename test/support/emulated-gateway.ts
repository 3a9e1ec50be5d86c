import { mkdtempSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { listen, serverUrl } from '../../shared/platform/http-server.js';
import { createFullEmulator } from '../../shared/emulator/emulator.js';
import { emulatorProviderEnv } from '../../shared/emulator/provider-env.js';
import { createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform, type TestPlatformOptions } from './test-platform.js';

/**
 * A test gateway whose every provider is the upstream emulator, configured through the providers'
 * own variables as a deployment would be. `fault` queues emulator faults; `clearFaults` drops them.
 */
export interface EmulatedGateway {
  gateway: TestPlatform;
  emulatorUrl: string;
  fault(rule: unknown): Promise<unknown>;
  clearFaults(): Promise<unknown>;
  close(): Promise<void>;
}

export async function startEmulatedGateway(env: Record<string, string> = {}, options: TestPlatformOptions = {}): Promise<EmulatedGateway> {
  const upstream = createFullEmulator();
  const emulator: http.Server = await listen(upstream.app, 0, '127.0.0.1');
  const emulatorUrl = serverUrl(emulator);
  const providerEnv = emulatorProviderEnv(emulatorUrl, upstream.credentials, mkdtempSync(path.join(os.tmpdir(), 'svc-gateway-')));
  const gateway = await startTestPlatform({ ...providerEnv, ...env }, options);
  return {
    gateway,
    emulatorUrl,
    fault: (rule) => fetch(`${emulatorUrl}/_emulator/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(rule) }),
    clearFaults: () => fetch(`${emulatorUrl}/_emulator/faults`, { method: 'DELETE' }),
    async close() {
      await gateway.close();
      // A request the gateway aborted (a cancelled batch line) can leave a socket that would hold close() for a minute.
      emulator.closeAllConnections();
      await new Promise((resolve) => emulator.close(resolve));
    },
  };
}

/** An emulated gateway and a developer with an admin key and `creditMicros` in its wallet: one test file's world. */
export async function startEmulatedGatewayWithDeveloper(
  env: Record<string, string> = {},
  creditMicros = 50_000_000,
  options: TestPlatformOptions = {},
): Promise<{ emulated: EmulatedGateway; gateway: TestPlatform; developer: TestDeveloper }> {
  const emulated = await startEmulatedGateway(env, options);
  const developer = await createDeveloper(emulated.gateway.platform, { creditMicros, scopes: ['admin'] });
  return { emulated, gateway: emulated.gateway, developer };
}
