import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmulatedGateway } from './support/emulated-gateway.js';
import { chatLine, createBatch, jsonl, readResultFile, startBatchGateway, uploadFile, waitForBatchEnd } from './support/batch-helpers.js';
import type { TestDeveloper, TestPlatform } from './support/test-platform.js';

/**
 * The completion window is a durable timer of the batch workflow. With a window of a few seconds
 * (the spec's is 24h; only the length differs) a slow batch expires with what it finished.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ emulated, gateway, developer, close } = await startBatchGateway({
    BATCH_COMPLETION_WINDOW_SECONDS: '3',
    BATCH_CHUNK_SIZE: '10',
    BATCH_UPSTREAM_CONCURRENCY: '2',
    BATCH_HEARTBEAT_TIMEOUT_SECONDS: '3',
  }));
});
afterAll(() => close?.());

describe('the completion window', () => {
  it('expires a batch with what it finished; the rest goes to the error file as batch_expired', async () => {
    await emulated.fault({ fault: { kind: 'latency', ms: 400 }, times: 100_000 });
    const lines = Array.from({ length: 40 }, (_, i) => chatLine(`expiring-${i}`));
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));
    expect(batch.expires_at - batch.created_at).toBeLessThanOrEqual(4);

    const done = await waitForBatchEnd(gateway, developer.key, batch.id, 60_000);
    expect(done.status).toBe('expired');
    expect(done.expired_at).toEqual(expect.any(Number));
    expect(done.request_counts.total).toBe(40);
    expect(done.request_counts.completed).toBeGreaterThan(0);
    expect(done.request_counts.completed + done.request_counts.failed).toBe(40);

    const output = await readResultFile(gateway, developer.key, done.output_file_id);
    const errors = await readResultFile(gateway, developer.key, done.error_file_id);
    expect(output.length).toBe(done.request_counts.completed);
    expect(errors.every((line) => line.error.code === 'batch_expired' && line.response === null)).toBe(true);
    const seen = [...output, ...errors].map((line) => line.custom_id);
    expect(seen.length).toBe(40);
    expect(new Set(seen)).toEqual(new Set(lines.map((line) => line.custom_id)));

    // Only what ran was billed, and no reservation is left behind.
    const { rows: usage } = await gateway.platform.db.query(`SELECT idempotency_key FROM usage_records WHERE idempotency_key LIKE $1`, [`batch:${batch.id}:%`]);
    expect(usage.map((row) => row.idempotency_key.split(':')[2]).sort()).toEqual(output.map((line) => line.custom_id).sort());
    const { rows: held } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM billing_holds WHERE developer_id = $1 AND status = 'held'`, [developer.accountId]);
    expect(held[0].n).toBe(0);
  }, 90_000);
});
