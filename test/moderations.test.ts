import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGateway, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper } from './support/test-platform.js';

let emulated: EmulatedGateway;
let developer: TestDeveloper;

beforeAll(async () => {
  emulated = await startEmulatedGateway();
  developer = await createDeveloper(emulated.gateway.platform, { creditMicros: 1_000, scopes: ['api:chat'] });
});
afterAll(() => emulated?.close());

describe('POST /v1/moderations', () => {
  it('passes with the official openai SDK, one result per input, metered at zero', async () => {
    const client = new OpenAI({ baseURL: `${emulated.gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
    const result = await client.moderations.create({ input: ['a friendly note', 'EMULATOR_FLAG this one'] });
    expect(result.id).toMatch(/^modr-/);
    expect(result.results.map((entry) => entry.flagged)).toEqual([false, true]);
    expect(result.results[1]!.categories.violence).toBe(true);
    const { rows } = await emulated.gateway.platform.db.query('SELECT w.balance_micros, u.cost_micros, u.model FROM wallets w JOIN usage_records u ON u.developer_id = w.account_id WHERE w.account_id = $1', [developer.accountId]);
    expect(rows).toEqual([{ balance_micros: '1000', cost_micros: '0', model: 'svc:openai/omni-moderation-latest' }]);
  });

  it.each([
    [{}, 'missing_input'],
    [{ input: [] }, 'missing_input'],
    [{ input: [42] }, 'invalid_input'],
    [{ input: 'x', model: 'gpt-4o' }, 'invalid_request'],
  ])('%j → 400 %s', async (json, code) => {
    const response = await call(emulated.gateway.baseUrl, '/v1/moderations', { method: 'POST', json, headers: bearer(developer.key) });
    expect({ status: response.status, code: response.body.error.code }).toEqual({ status: 400, code });
  });
});

describe('GET /v1/models', () => {
  it('lists the catalog with estimated prices per million tokens and what this deployment reaches', async () => {
    const reader = await createDeveloper(emulated.gateway.platform, { scopes: ['api:read'] });
    const client = new OpenAI({ baseURL: `${emulated.gateway.baseUrl}/v1`, apiKey: reader.key, maxRetries: 0 });
    const models = [];
    for await (const model of client.models.list()) models.push(model as unknown as Record<string, unknown>);
    const mini = models.find((model) => model.id === 'svc:openai/gpt-4o-mini')!;
    expect(mini).toMatchObject({ object: 'model', owned_by: 'openai', kind: 'chat', estimated_input_per_1m: 0.15, estimated_output_per_1m: 0.6, available: true });
    expect(models.filter((model) => model.kind === 'embedding')).toHaveLength(9);
    const noRead = await call(emulated.gateway.baseUrl, '/v1/models', { headers: bearer(developer.key) });
    expect(noRead.body.error.code).toBe('insufficient_scope');
  });
});
