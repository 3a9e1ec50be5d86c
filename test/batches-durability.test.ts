import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costMicros } from '../shared/inference/pricing.js';
import { catalogModel } from '../shared/models/catalog.js';
import type { EmulatedGateway } from './support/emulated-gateway.js';
import { pollUntil } from './support/poll.js';
import { chatLine, createBatch, getBatch, jsonl, readResultFile, uploadFile, waitForBatchEnd, walletMicros } from './support/batch-helpers.js';
import type { TestDeveloper, TestPlatform } from './support/test-platform.js';
import type { WorkerProcess } from './support/worker-process.js';
import { startWorkerWorld, type WorkerWorld } from './support/worker-world.js';

/**
 * Exactly once under SIGKILL: the real worker process (`workers/main.ts`) is killed twice while a
 * batch runs (lines in flight, results not yet written, chunks half done), and restarted. The
 * batch still completes with every custom_id exactly once across its files, and the wallet is
 * debited exactly once per line.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let worker: WorkerProcess;

let world: WorkerWorld;

beforeAll(async () => {
  world = await startWorkerWorld({
    BATCH_CHUNK_SIZE: '25',
    BATCH_PARALLEL_CHUNKS: '2',
    BATCH_UPSTREAM_CONCURRENCY: '8',
    // A killed worker's chunks are taken over within seconds.
    BATCH_HEARTBEAT_TIMEOUT_SECONDS: '3',
  });
  ({ emulated, gateway, developer, worker } = world);
}, 120_000);

afterAll(() => world?.close());

describe('a batch whose worker is killed twice mid-run', () => {
  it('completes with each custom_id exactly once and the wallet debited exactly once per line', async () => {
    // Slow answers keep lines in flight when the kills land.
    await emulated.fault({ fault: { kind: 'latency', ms: 150 }, times: 100_000 });
    const count = 150;
    const lines = Array.from({ length: count }, (_, i) => chatLine(`line-${i}`, `Question number ${i}`));
    const before = await walletMicros(gateway.platform, developer.accountId);
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));

    const progress = () => getBatch(gateway, developer.key, batch.id);
    const first = await pollUntil(progress, (current) => current.request_counts.completed >= 20, { everyMs: 20 });
    await worker.kill('SIGKILL');
    await worker.restart();
    const second = await pollUntil(progress, (current) => current.request_counts.completed >= Math.min(first.request_counts.completed + 30, count - 20), { everyMs: 20 });
    await worker.kill('SIGKILL');
    await worker.restart();
    // Both kills landed mid-run.
    expect([first.status, second.status]).toEqual(['in_progress', 'in_progress']);
    expect(second.request_counts.completed).toBeLessThan(count);

    const done = await waitForBatchEnd(gateway, developer.key, batch.id, 180_000);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: count, completed: count, failed: 0 });

    const output = await readResultFile(gateway, developer.key, done.output_file_id);
    const errors = await readResultFile(gateway, developer.key, done.error_file_id);
    const seen = [...output, ...errors].map((line) => line.custom_id);
    expect(seen.length).toBe(count);
    expect(new Set(seen)).toEqual(new Set(lines.map((line) => line.custom_id)));

    // One settled charge per line, under the line's own key: a line run again after a kill settled nothing new.
    const { rows: usage } = await gateway.platform.db.query(`SELECT idempotency_key, cost_micros FROM usage_records WHERE idempotency_key LIKE $1`, [`batch:${batch.id}:%`]);
    expect(usage.length).toBe(count);
    expect(new Set(usage.map((row) => row.idempotency_key))).toEqual(new Set(lines.map((line) => `batch:${batch.id}:${line.custom_id}:0:0`)));
    const { rows: ledger } = await gateway.platform.db.query(`SELECT count(*)::int AS n, COALESCE(sum(-amount_micros), 0)::bigint AS debited FROM wallet_ledger WHERE account_id = $1 AND kind = 'usage'`, [developer.accountId]);
    expect(ledger[0].n).toBe(count);

    // The debit is the half price (150 requests) of exactly the tokens in the output, once each.
    const model = catalogModel('svc:openai/gpt-4o-mini')!;
    const expected = output.reduce((sum, line) => {
      const { prompt_tokens, completion_tokens } = line.response.body.usage;
      return sum + Math.round(costMicros(model, { inputTokens: prompt_tokens, outputTokens: completion_tokens }) * 0.5);
    }, 0);
    expect(Number(ledger[0].debited)).toBe(expected);
    expect(before - (await walletMicros(gateway.platform, developer.accountId))).toBe(expected);
  }, 300_000);
});
