import { createTemporalWorker, bundleWorkflows } from '../../workers/temporal-worker.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './emulated-gateway.js';
import { bearer, call, type TestDeveloper, type TestPlatform } from './test-platform.js';
import { pollUntil } from './poll.js';

/** Helpers of the batch suites: uploads, polling, reading result files, an in-process worker. */

export interface BatchLine {
  custom_id: string;
  method: string;
  url: string;
  body: Record<string, unknown>;
}

export const chatLine = (customId: string, content = `Say something about ${customId}`, model = 'svc:openai/gpt-4o-mini'): BatchLine => ({
  custom_id: customId,
  method: 'POST',
  url: '/v1/chat/completions',
  body: { model, messages: [{ role: 'user', content }], max_tokens: 30 },
});

export const jsonl = (lines: unknown[]) => lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n') + '\n';

export async function uploadFile(gateway: TestPlatform, key: string, content: string, purpose = 'batch', filename = 'batch.jsonl'): Promise<string> {
  const body = new FormData();
  body.append('purpose', purpose);
  body.append('file', new Blob([content]), filename);
  const created = await call(gateway.baseUrl, '/v1/files', { method: 'POST', body, headers: bearer(key) });
  if (created.status !== 200) throw new Error(`upload failed: ${created.status} ${created.text}`);
  return created.body.id;
}

export async function createBatch(gateway: TestPlatform, key: string, inputFileId: string, endpoint = '/v1/chat/completions') {
  const created = await call(gateway.baseUrl, '/v1/batches', { method: 'POST', json: { input_file_id: inputFileId, endpoint, completion_window: '24h' }, headers: bearer(key) });
  if (created.status !== 200) throw new Error(`batch create failed: ${created.status} ${created.text}`);
  return created.body;
}

export async function getBatch(gateway: TestPlatform, key: string, id: string) {
  return (await call(gateway.baseUrl, `/v1/batches/${id}`, { headers: bearer(key) })).body;
}

const TERMINAL = ['completed', 'failed', 'expired', 'cancelled'];
export const waitForBatchEnd = (gateway: TestPlatform, key: string, id: string, timeoutMs?: number) =>
  pollUntil(() => getBatch(gateway, key, id), (batch) => TERMINAL.includes(batch.status), { timeoutMs });

/** The parsed lines of a file, or [] when the batch has no such file. */
export async function readResultFile(gateway: TestPlatform, key: string, fileId: string | null): Promise<any[]> {
  if (!fileId) return [];
  const response = await fetch(`${gateway.baseUrl}/v1/files/${fileId}/content`, { headers: bearer(key) });
  if (response.status !== 200) throw new Error(`download failed: ${response.status}`);
  return (await response.text())
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

/**
 * A batch suite's world: the gateway with the emulator as every provider, a developer funded with
 * 100 USD, and a batch worker in this process. `close` stops the worker, then the rest.
 */
export async function startBatchGateway(env: Record<string, string>): Promise<{ emulated: EmulatedGateway; gateway: TestPlatform; developer: TestDeveloper; close(): Promise<void> }> {
  const started = await startEmulatedGatewayWithDeveloper(env, 100_000_000);
  const worker = await startInProcessWorker(started.gateway.platform);
  return {
    ...started,
    async close() {
      await worker.stop();
      await started.emulated.close();
    },
  };
}

/** A Temporal worker inside the test process on the platform's task queue (for suites that never kill it). */
export async function startInProcessWorker(platform: GatewayServices): Promise<{ stop(): Promise<void> }> {
  const { worker, connection } = await createTemporalWorker(platform, { bundle: await bundleWorkflows() });
  const running = worker.run();
  return {
    async stop() {
      worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

export { walletBalanceMicros as walletMicros } from './test-platform.js';
