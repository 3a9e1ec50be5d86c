import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../../scripts/lib/local-services.js';
import { printedJson } from './child-output.js';

/**
 * The upstream emulator in a process of its own, as an upstream would be, answering after
 * `latencyMs`; `providerEnv` points the gateway's OpenAI provider at it.
 */
export async function startEmulatorProcess(latencyMs: number): Promise<{ child: ChildProcess; providerEnv: { OPENAI_API_KEY: string; OPENAI_BASE_URL: string } }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'shared/emulator/main.ts'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, EMULATOR_PORT: String(await freePort()), EMULATOR_LATENCY_MS: String(latencyMs) },
  });
  const printed = await printedJson(child, 'listening');
  return { child, providerEnv: { OPENAI_API_KEY: printed.api_keys.openai as string, OPENAI_BASE_URL: `${printed.listening}/openai/v1` } };
}
