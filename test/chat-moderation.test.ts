import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, type TestDeveloper, type TestPlatform, walletBalanceMicros } from './support/test-platform.js';

/**
 * Inline moderation on chat completions (body field `moderation`), through the platform's own
 * moderation provider (the emulator flags any text containing the word EMULATOR_FLAG, and
 * EMULATOR_SAY_FLAG in a prompt makes the chat reply contain it).
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper());
});
afterAll(() => emulated?.close());

const MODEL = 'svc:openai/gpt-4o-mini';
const MODERATION_MODEL = 'svc:openai/omni-moderation-latest';
const chat = (json: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json, headers: { ...bearer(developer.key), ...headers } });
const user = (content: string) => [{ role: 'user', content }];

const walletMicros = () => walletBalanceMicros(gateway.platform, developer.accountId);

async function usageOf(requestId: string | null): Promise<Array<{ model: string; cost_micros: number; tokens_out: number }>> {
  const { rows } = await gateway.platform.db.query('SELECT model, cost_micros::int, tokens_out FROM usage_records WHERE developer_id = $1 AND request_id = $2 ORDER BY id', [developer.accountId, requestId]);
  return rows;
}

async function flaggedEvents(): Promise<Array<Record<string, unknown>>> {
  const { rows } = await gateway.platform.db.query(`SELECT data FROM outbox_events WHERE developer_id = $1 AND type = 'moderation.flagged' ORDER BY created_at, id`, [developer.accountId]);
  return rows.map((row) => row.data);
}

describe('moderation: pre', () => {
  it('refuses a flagged prompt with 400 moderation_flagged before any model call, bills nothing and records moderation.flagged', async () => {
    const before = await walletMicros();
    const response = await chat({ model: MODEL, messages: user('EMULATOR_FLAG tell me something'), moderation: 'pre' }, { 'Svc-Customer': 'mod-alice' });
    expect({ status: response.status, type: response.body.error.type, code: response.body.error.code }).toEqual({ status: 400, type: 'invalid_request_error', code: 'moderation_flagged' });
    expect(await walletMicros()).toBe(before);
    const requestId = response.headers.get('x-request-id');
    // Only the moderation call ran, metered at zero.
    expect(await usageOf(requestId)).toEqual([{ model: MODERATION_MODEL, cost_micros: 0, tokens_out: 0 }]);
    const { rows } = await gateway.platform.db.query('SELECT id FROM customers WHERE developer_id = $1 AND external_id = $2', [developer.accountId, 'mod-alice']);
    expect((await flaggedEvents()).at(-1)).toEqual({
      request_id: requestId,
      stage: 'pre',
      categories: ['violence'],
      customer_id: rows[0].id,
      model: MODEL,
      moderation_model: MODERATION_MODEL,
      flagged_inputs: 1,
    });
  });

  it('lets a clean prompt through: the completion is billed, the moderation call is recorded at zero', async () => {
    const before = await walletMicros();
    const response = await chat({ model: MODEL, messages: user('A friendly question'), moderation: 'pre' });
    expect(response.status).toBe(200);
    expect(before - (await walletMicros())).toBeGreaterThan(0);
    expect((await usageOf(response.headers.get('x-request-id'))).map((row) => [row.model, row.cost_micros > 0])).toEqual([
      [MODERATION_MODEL, false],
      [MODEL, true],
    ]);
  });

  it('moderates every message, including text parts', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'and EMULATOR_FLAG here' }] },
    ];
    const response = await chat({ model: MODEL, messages, moderation: 'pre_and_post' });
    expect(response.body.error.code).toBe('moderation_flagged');
  });

  it('works with a stream: a flagged prompt is refused before the stream opens, a clean one streams', async () => {
    const before = await walletMicros();
    const flagged = await chat({ model: MODEL, messages: user('EMULATOR_FLAG stream'), moderation: 'pre', stream: true });
    expect({ status: flagged.status, code: flagged.body.error.code }).toEqual({ status: 400, code: 'moderation_flagged' });
    expect(await walletMicros()).toBe(before);
    expect((await flaggedEvents()).at(-1)).toMatchObject({ request_id: flagged.headers.get('x-request-id'), stage: 'pre' });

    const clean = await chat({ model: MODEL, messages: user('a clean stream'), moderation: 'pre', stream: true });
    expect(clean.status).toBe(200);
    expect(clean.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(clean.text.trim().endsWith('data: [DONE]')).toBe(true);
    expect((await usageOf(clean.headers.get('x-request-id'))).map((row) => row.model)).toEqual([MODERATION_MODEL, MODEL]);
  });
});

describe('moderation: post', () => {
  it('refuses a flagged completion with 400 moderation_flagged; the completion was generated, so it is billed', async () => {
    const prompt = user('EMULATOR_SAY_FLAG please');
    const before = await walletMicros();
    const response = await chat({ model: MODEL, messages: prompt, moderation: 'post' });
    expect({ status: response.status, code: response.body.error.code }).toEqual({ status: 400, code: 'moderation_flagged' });
    expect(response.body.error.message).toMatch(/completion/);
    const requestId = response.headers.get('x-request-id');
    const usage = await usageOf(requestId);
    expect(usage.map((row) => row.model)).toEqual([MODEL, MODERATION_MODEL]);
    expect(usage[0]!.tokens_out).toBeGreaterThan(0);
    expect(before - (await walletMicros())).toBe(usage[0]!.cost_micros);
    expect((await flaggedEvents()).at(-1)).toMatchObject({ request_id: requestId, stage: 'post', categories: ['violence'], model: MODEL, customer_id: null });
  });

  it('pre lets a prompt through that only makes the output flagged; pre_and_post catches it after', async () => {
    const preOnly = await chat({ model: MODEL, messages: user('EMULATOR_SAY_FLAG once more'), moderation: 'pre' });
    expect(preOnly.status).toBe(200);
    expect(preOnly.body.choices[0].message.content).toMatch(/^EMULATOR_FLAG /);
    const both = await chat({ model: MODEL, messages: user('EMULATOR_SAY_FLAG once more'), moderation: 'pre_and_post' });
    expect(both.body.error.code).toBe('moderation_flagged');
    expect((await usageOf(both.headers.get('x-request-id'))).map((row) => row.model)).toEqual([MODERATION_MODEL, MODEL, MODERATION_MODEL]);
  });

  it('returns a clean completion unchanged', async () => {
    const response = await chat({ model: MODEL, messages: user('Nothing to see'), moderation: 'post' });
    expect(response.status).toBe(200);
    expect(response.body.object).toBe('chat.completion');
  });

  it.each(['post', 'pre_and_post'])('400 invalid_request for moderation: %s with stream: true, before anything is called', async (moderation) => {
    const before = await walletMicros();
    const response = await chat({ model: MODEL, messages: user('hello'), moderation, stream: true });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'moderation' });
    expect(await walletMicros()).toBe(before);
    expect(await usageOf(response.headers.get('x-request-id'))).toEqual([]);
  });

  it('400 invalid_request for an unknown moderation value', async () => {
    const response = await chat({ model: MODEL, messages: user('hello'), moderation: 'sometimes' });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'moderation' });
  });

  it('fails closed with 503 upstream_unavailable when the moderation provider keeps failing', async () => {
    await emulated.fault({ provider: 'openai', model: 'omni-moderation-latest', fault: { kind: 'status', status: 500 }, times: 10 });
    try {
      const before = await walletMicros();
      const response = await chat({ model: MODEL, messages: user('hello'), moderation: 'pre' });
      expect({ status: response.status, code: response.body.error.code }).toEqual({ status: 503, code: 'upstream_unavailable' });
      expect(await walletMicros()).toBe(before);
    } finally {
      await emulated.clearFaults();
    }
  });
});
