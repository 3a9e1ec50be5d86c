import OpenAI, { toFile } from 'openai';
import { expectError } from './support/expect-error.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startBatchWorkflow, startUnstartedBatches } from '../shared/batches/batches.js';
import { insertBatch } from '../shared/batches/repository.js';
import { catalogModel } from '../shared/models/catalog.js';
import { costMicros } from '../shared/inference/pricing.js';
import type { EmulatedGateway } from './support/emulated-gateway.js';
import { pollUntil } from './support/poll.js';
import { chatLine, createBatch, getBatch, jsonl, readResultFile, startBatchGateway, uploadFile, waitForBatchEnd, walletMicros } from './support/batch-helpers.js';
import { bearer, call, createDeveloper, type ApiResponse, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

/**
 * Batches end to end: the real API, PostgreSQL, Temporal (a worker in this process on the test
 * platform's task queue) and the upstream emulator as every provider.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ emulated, gateway, developer, close } = await startBatchGateway({
    // Small chunks, so even small batches run several chunk activities.
    BATCH_CHUNK_SIZE: '4',
    BATCH_PARALLEL_CHUNKS: '2',
    BATCH_HEARTBEAT_TIMEOUT_SECONDS: '5',
  }));
});
afterAll(() => close?.());
afterEach(() => emulated.clearFaults());

const post = (pathname: string, json: unknown, key = developer.key) => call(gateway.baseUrl, pathname, { method: 'POST', json, headers: bearer(key) });


async function batchEvents(batchId: string): Promise<string[]> {
  const { rows } = await gateway.platform.db.query(`SELECT type FROM outbox_events WHERE data->'batch'->>'id' = $1 ORDER BY created_at, id`, [batchId]);
  return rows.map((row) => row.type);
}

async function usageOf(batchId: string): Promise<{ key: string; cost: number; billable: number }[]> {
  const { rows } = await gateway.platform.db.query(`SELECT idempotency_key AS key, cost_micros, billable_micros FROM usage_records WHERE idempotency_key LIKE $1 ORDER BY id`, [`batch:${batchId}:%`]);
  return rows.map((row) => ({ key: row.key, cost: Number(row.cost_micros), billable: Number(row.billable_micros) }));
}

describe('through the official openai SDK', () => {
  it('uploads a JSONL file, creates a batch, polls it to completion and downloads the output', async () => {
    const client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
    const lines = Array.from({ length: 12 }, (_, i) => chatLine(`sdk-${i}`));
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'requests.jsonl'), purpose: 'batch' });
    expect(file).toMatchObject({ object: 'file', purpose: 'batch', filename: 'requests.jsonl' });

    const created = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { job: 'nightly' } });
    expect(created).toMatchObject({ object: 'batch', status: 'validating', endpoint: '/v1/chat/completions', input_file_id: file.id, completion_window: '24h', metadata: { job: 'nightly' } });
    expect(created.id).toMatch(/^batch_/);

    const batch = await pollUntil(() => client.batches.retrieve(created.id), (current) => ['completed', 'failed', 'expired', 'cancelled'].includes(current.status));
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 12, completed: 12, failed: 0 });
    expect(batch.error_file_id).toBeNull();
    for (const stamp of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(batch[stamp]).toEqual(expect.any(Number));

    const output = await (await client.files.content(batch.output_file_id!)).text();
    const results = output.trim().split('\n').map((line) => JSON.parse(line));
    expect(results.map((result) => result.custom_id)).toEqual(lines.map((line) => line.custom_id));
    for (const result of results) {
      expect(result.id).toMatch(/^batch_req_/);
      expect(result.error).toBeNull();
      expect(result.response.status_code).toBe(200);
      expect(result.response.request_id).toMatch(/^req_/);
      expect(result.response.body).toMatchObject({ object: 'chat.completion', model: 'svc:openai/gpt-4o-mini' });
      expect(result.response.body.choices[0].message.content).toMatch(/\w+/);
    }
    const outputFile = await client.files.retrieve(batch.output_file_id!);
    expect(outputFile).toMatchObject({ purpose: 'batch_output', bytes: Buffer.byteLength(output) });

    const listed = await client.batches.list({ limit: 100 });
    expect(listed.data.map((entry) => entry.id)).toContain(created.id);
    expect(await batchEvents(created.id)).toEqual(['batch.created', 'batch.completed']);
  });
});

describe('batch create refusals', () => {
  let batchFile: string;
  beforeAll(async () => {
    batchFile = await uploadFile(gateway, developer.key, jsonl([chatLine('a')]));
  });
  const valid = () => ({ input_file_id: batchFile, endpoint: '/v1/chat/completions', completion_window: '24h' });

  it('needs an input_file_id of an existing file uploaded with purpose batch', async () => {
    const { input_file_id: _, ...withoutFile } = valid();
    expectError(await post('/v1/batches', withoutFile), 400, 'missing_input_file_id', { param: 'input_file_id' });
    expectError(await post('/v1/batches', { ...valid(), input_file_id: 'file_doesnotexist000000000000' }), 404, 'not_found', { param: 'input_file_id' });
    const visionFile = await uploadFile(gateway, developer.key, jsonl([chatLine('a')]), 'vision', 'image.jsonl');
    expectError(await post('/v1/batches', { ...valid(), input_file_id: visionFile }), 400, 'input_file_wrong_purpose', { param: 'input_file_id' });
    // Another developer's file is not found, never forbidden.
    const stranger = await createDeveloper(gateway.platform);
    expectError(await post('/v1/batches', valid(), stranger.key), 404, 'not_found', { param: 'input_file_id' });
  });

  it('takes only the three batch endpoints and the 24h window', async () => {
    expectError(await post('/v1/batches', { ...valid(), endpoint: '/v1/completions' }), 400, 'invalid_endpoint', { param: 'endpoint' });
    expectError(await post('/v1/batches', { ...valid(), endpoint: undefined }), 400, 'invalid_endpoint', { param: 'endpoint' });
    expectError(await post('/v1/batches', { ...valid(), completion_window: '48h' }), 400, 'invalid_completion_window', { param: 'completion_window' });
    expectError(await post('/v1/batches', { ...valid(), completion_window: undefined }), 400, 'invalid_completion_window', { param: 'completion_window' });
  });

  it('limits metadata to 16 keys and 4 KB', async () => {
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    expectError(await post('/v1/batches', { ...valid(), metadata: many }), 400, 'metadata_too_many_keys', { param: 'metadata' });
    const large = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`key${i}`, 'x'.repeat(500)]));
    expectError(await post('/v1/batches', { ...valid(), metadata: large }), 400, 'metadata_too_large', { param: 'metadata' });
    // Nothing refused made a batch.
    const { rows } = await gateway.platform.db.query('SELECT count(*)::int AS n FROM batches WHERE input_file_id = $1', [batchFile]);
    expect(rows[0].n).toBe(0);
  });

  it('is for developer keys: a client token is refused', async () => {
    const customer = await post('/v1/customers', { external_id: 'batch-client' });
    const minted = await post(`/v1/customers/${customer.body.id}/client_tokens`, {});
    const refused = await call(gateway.baseUrl, '/v1/batches', { method: 'POST', json: valid(), headers: { Authorization: `Client ${minted.body.token}` } });
    expectError(refused, 403, 'endpoint_not_allowed_for_client_token', { param: undefined });
  });

  it('answers 404 for an unknown or foreign batch, and 409 batch_not_cancellable for a finished one', async () => {
    expectError(await call(gateway.baseUrl, '/v1/batches/batch_nope', { headers: bearer(developer.key) }), 404, 'not_found', { param: undefined });
    const batch = await createBatch(gateway, developer.key, batchFile);
    const stranger = await createDeveloper(gateway.platform);
    expectError(await call(gateway.baseUrl, `/v1/batches/${batch.id}`, { headers: bearer(stranger.key) }), 404, 'not_found', { param: undefined });
    expectError(await post(`/v1/batches/${batch.id}/cancel`, {}, stranger.key), 404, 'not_found', { param: undefined });
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('completed');
    expectError(await post(`/v1/batches/${batch.id}/cancel`, {}), 409, 'batch_not_cancellable', { param: undefined });
  });
});

describe('running batches', () => {
  it('sends invalid lines to the error file and runs the rest, each custom_id exactly once', async () => {
    const content = jsonl([
      chatLine('ok-1'),
      'this is not json',
      { ...chatLine('wrong-url'), url: '/v1/embeddings' },
      chatLine('ok-2'),
      chatLine('ok-1', 'a second line with the same custom_id'),
      { ...chatLine('wrong-method'), method: 'GET' },
      { method: 'POST', url: '/v1/chat/completions', body: { model: 'svc:openai/gpt-4o-mini', messages: [] } },
      chatLine('bad-model', 'hi', 'gpt-4o'),
      [1, 2, 3],
      chatLine('ok-3'),
    ]);
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, content));
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 10, completed: 3, failed: 7 });

    const output = await readResultFile(gateway, developer.key, done.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(['ok-1', 'ok-2', 'ok-3']);
    expect(output[0].response.body.choices[0].message.content).not.toContain('second line');

    const errors = await readResultFile(gateway, developer.key, done.error_file_id);
    expect(errors.map((line) => [line.custom_id, line.error?.code ?? line.response.body.error.code, line.error?.line ?? null])).toEqual([
      [null, 'invalid_json_line', 2],
      ['wrong-url', 'mismatched_url', 3],
      ['ok-1', 'duplicate_custom_id', 5],
      ['wrong-method', 'invalid_method', 6],
      [null, 'missing_custom_id', 7],
      ['bad-model', 'invalid_model_ref', null],
      [null, 'invalid_json_line', 9],
    ]);
    // A line refused by the inference path has the response a synchronous call would have had.
    const refused = errors.find((line) => line.custom_id === 'bad-model');
    expect(refused).toMatchObject({ error: null, response: { status_code: 400, body: { error: { type: 'invalid_request_error', code: 'invalid_model_ref' } } } });
    expect(new Set(errors.map((line) => line.id)).size).toBe(errors.length);
    // Only the lines that ran were billed.
    expect((await usageOf(batch.id)).length).toBe(3);
  });

  it('charges the normal price below 10 requests and half of it from 10 up', async () => {
    const model = catalogModel('svc:openai/gpt-4o-mini')!;
    for (const [count, factor] of [
      [9, 1],
      [10, 0.5],
    ] as const) {
      const before = await walletMicros(gateway.platform, developer.accountId);
      const lines = Array.from({ length: count }, (_, i) => chatLine(`price-${count}-${i}`, `Price question ${i} of ${count}`));
      const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));
      const done = await waitForBatchEnd(gateway, developer.key, batch.id);
      expect(done.request_counts).toEqual({ total: count, completed: count, failed: 0 });
      const output = await readResultFile(gateway, developer.key, done.output_file_id);
      const expected = output.map((line) => {
        const usage = line.response.body.usage;
        return Math.round(costMicros(model, { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens }) * factor);
      });
      const usage = await usageOf(batch.id);
      expect(usage.map((row) => row.key).sort()).toEqual(lines.map((line) => `batch:${batch.id}:${line.custom_id}:0:0`).sort());
      expect(usage.reduce((sum, row) => sum + row.cost, 0)).toBe(expected.reduce((sum, cost) => sum + cost, 0));
      expect(before - (await walletMicros(gateway.platform, developer.accountId))).toBe(expected.reduce((sum, cost) => sum + cost, 0));
    }
  });

  it('attributes a line to the customer named by its body user, created on first use', async () => {
    const lines = [{ ...chatLine('for-alice'), body: { ...chatLine('for-alice').body, user: 'alice-batch' } }, chatLine('for-nobody')];
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));
    expect((await waitForBatchEnd(gateway, developer.key, batch.id)).status).toBe('completed');
    const { rows } = await gateway.platform.db.query(
      `SELECT u.idempotency_key, c.external_id FROM usage_records u LEFT JOIN customers c ON c.id = u.customer_id WHERE u.idempotency_key LIKE $1 ORDER BY u.idempotency_key`,
      [`batch:${batch.id}:%`],
    );
    expect(rows.map((row) => [row.idempotency_key.split(':')[2], row.external_id])).toEqual([
      ['for-alice', 'alice-batch'],
      ['for-nobody', null],
    ]);
  });

  it('runs embeddings and moderations batches', async () => {
    const embeddings = Array.from({ length: 3 }, (_, i) => ({ custom_id: `emb-${i}`, method: 'POST', url: '/v1/embeddings', body: { model: 'text-embedding-3-small', input: `text ${i}`, dimensions: 8 } }));
    const moderations = Array.from({ length: 2 }, (_, i) => ({ custom_id: `mod-${i}`, method: 'POST', url: '/v1/moderations', body: { input: `text ${i}` } }));
    const embeddingBatch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(embeddings)), '/v1/embeddings');
    const moderationBatch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(moderations)), '/v1/moderations');
    const embedded = await waitForBatchEnd(gateway, developer.key, embeddingBatch.id);
    expect(embedded.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
    for (const line of await readResultFile(gateway, developer.key, embedded.output_file_id)) {
      expect(line.response.body).toMatchObject({ object: 'list', model: 'text-embedding-3-small' });
      expect(line.response.body.data[0].embedding).toHaveLength(8);
    }
    const moderated = await waitForBatchEnd(gateway, developer.key, moderationBatch.id);
    expect(moderated.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    const results = await readResultFile(gateway, developer.key, moderated.output_file_id);
    expect(results.map((line) => line.response.body.results.length)).toEqual([1, 1]);
    expect((await usageOf(moderationBatch.id)).every((row) => row.cost === 0)).toBe(true);
  });

  it('fails a batch whose file has no requests', async () => {
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, '\n\n'));
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('failed');
    expect(done.errors.data[0]).toMatchObject({ code: 'empty_file' });
    expect(done.failed_at).toEqual(expect.any(Number));
    expect(await batchEvents(batch.id)).toEqual(['batch.created', 'batch.failed']);
  });

  it('fails a batch of more than 50,000 requests, keeping none of its lines', async () => {
    const line = (i: number) => `{"custom_id":"${i}","method":"POST","url":"/v1/chat/completions","body":{}}`;
    const content = `${Array.from({ length: 50_001 }, (_, i) => line(i)).join('\n')}\n`;
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, content));
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('failed');
    expect(done.errors.data[0]).toMatchObject({ code: 'too_many_requests', param: 'input_file_id' });
    const { rows } = await gateway.platform.db.query('SELECT count(*)::int AS n FROM batch_requests WHERE batch_id = $1', [batch.id]);
    expect(rows[0].n).toBe(0);
    expect((await usageOf(batch.id)).length).toBe(0);
  }, 120_000);

  it('starts the workflow of a batch whose start never happened, under the batch id', async () => {
    // A create whose process died (or whose Temporal was away) between the commit and the start.
    const file = await uploadFile(gateway, developer.key, jsonl([chatLine('recovered-1'), chatLine('recovered-2')]));
    const orphan = await insertBatch(gateway.platform.db, {
      id: `batch_orphan${Date.now()}`,
      developerId: developer.accountId,
      payerAccountId: developer.accountId,
      endpoint: '/v1/chat/completions',
      inputFileId: file,
      metadata: null,
      windowSeconds: 86_400,
    });
    expect(orphan.workflow_started).toBe(false);
    expect(await startUnstartedBatches(gateway.platform, 0)).toBeGreaterThanOrEqual(1);
    const done = await waitForBatchEnd(gateway, developer.key, orphan.id);
    expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    const { rows } = await gateway.platform.db.query('SELECT workflow_started FROM batches WHERE id = $1', [orphan.id]);
    expect(rows[0].workflow_started).toBe(true);
    // Starting again finds the same workflow: nothing runs twice.
    await startBatchWorkflow(gateway.platform, orphan);
    expect((await usageOf(orphan.id)).length).toBe(2);
  });

  it('tells pollers when to read a batch again while it runs, and not once it has ended', async () => {
    const pace = (response: ApiResponse) => response.headers.get('openai-poll-after-ms');
    const file = await uploadFile(gateway, developer.key, jsonl([chatLine('paced-1'), chatLine('paced-2')]));
    const created = await post('/v1/batches', { input_file_id: file, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect([created.body.status, pace(created)]).toEqual(['validating', '1000']);
    // A batch whose workflow has not started yet stays validating while it is read.
    const unstarted = await insertBatch(gateway.platform.db, {
      id: `batch_paced${Date.now()}`, developerId: developer.accountId, payerAccountId: developer.accountId, endpoint: '/v1/chat/completions', inputFileId: file, metadata: null, windowSeconds: 86_400,
    });
    const read = await call(gateway.baseUrl, `/v1/batches/${unstarted.id}`, { headers: bearer(developer.key) });
    expect([read.body.status, pace(read)]).toEqual(['validating', '1000']);
    await startBatchWorkflow(gateway.platform, unstarted);
    for (const id of [created.body.id, unstarted.id]) {
      expect((await waitForBatchEnd(gateway, developer.key, id)).status).toBe('completed');
      const ended = await call(gateway.baseUrl, `/v1/batches/${id}`, { headers: bearer(developer.key) });
      expect([ended.body.status, pace(ended)]).toEqual(['completed', null]);
    }
  });

  it('cancels mid-run: cancelling, then cancelled with the finished lines and nothing billed twice', async () => {
    // Slow upstream answers keep the batch running while we cancel it.
    await emulated.fault({ fault: { kind: 'latency', ms: 400 }, times: 10_000 });
    const lines = Array.from({ length: 60 }, (_, i) => chatLine(`cancel-${i}`));
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));
    await pollUntil(() => getBatch(gateway, developer.key, batch.id), (current) => current.request_counts.completed >= 4);
    const cancelled = await post(`/v1/batches/${batch.id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelling');
    expect(cancelled.body.cancelling_at).toEqual(expect.any(Number));
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('cancelled');
    expect(done.cancelled_at).toEqual(expect.any(Number));
    expect(done.request_counts.completed).toBeGreaterThanOrEqual(4);
    expect(done.request_counts.completed).toBeLessThan(60);

    const output = await readResultFile(gateway, developer.key, done.output_file_id);
    const ids = output.map((line) => line.custom_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(done.request_counts.completed);
    // Every finished line was billed once; nothing else was.
    const usage = await usageOf(batch.id);
    expect(usage.map((row) => row.key.split(':')[2]).sort()).toEqual([...ids].sort());
    // The reservations of the aborted lines went back.
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM billing_holds WHERE developer_id = $1 AND status = 'held'`, [developer.accountId]);
    expect(rows[0].n).toBe(0);
    expect(await batchEvents(batch.id)).toEqual(['batch.created', 'batch.cancelled']);
    expectError(await post(`/v1/batches/${batch.id}/cancel`, {}), 409, 'batch_not_cancellable', { param: undefined });
  });

  it('ends cancelled with its finished lines when the workflow itself is cancelled in Temporal', async () => {
    await emulated.fault({ fault: { kind: 'latency', ms: 400 }, times: 10_000 });
    const lines = Array.from({ length: 40 }, (_, i) => chatLine(`operator-${i}`));
    const batch = await createBatch(gateway, developer.key, await uploadFile(gateway, developer.key, jsonl(lines)));
    await pollUntil(() => getBatch(gateway, developer.key, batch.id), (current) => current.request_counts.completed >= 2);
    // What an operator does from the Web UI or `temporal workflow cancel`.
    await gateway.platform.temporal.client.workflow.getHandle(batch.id).cancel();
    const done = await waitForBatchEnd(gateway, developer.key, batch.id);
    expect(done.status).toBe('cancelled');
    const output = await readResultFile(gateway, developer.key, done.output_file_id);
    expect(output.length).toBe(done.request_counts.completed);
    expect((await usageOf(batch.id)).map((row) => row.key.split(':')[2]).sort()).toEqual(output.map((line) => line.custom_id).sort());
    expect(await batchEvents(batch.id)).toEqual(['batch.created', 'batch.cancelled']);
  });

  it('lists batches newest first with the cursor envelope', async () => {
    const owner = await createDeveloper(gateway.platform);
    const file = await uploadFile(gateway, owner.key, jsonl([chatLine('list')]));
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await createBatch(gateway, owner.key, file)).id);
    const first = await call(gateway.baseUrl, '/v1/batches?limit=2', { headers: bearer(owner.key) });
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((batch: { id: string }) => batch.id)).toEqual([ids[2], ids[1]]);
    const rest = await call(gateway.baseUrl, `/v1/batches?limit=2&after=${first.body.next_cursor}`, { headers: bearer(owner.key) });
    expect(rest.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(rest.body.data.map((batch: { id: string }) => batch.id)).toEqual([ids[0]]);
    for (const id of ids) await waitForBatchEnd(gateway, owner.key, id);
  });
});
