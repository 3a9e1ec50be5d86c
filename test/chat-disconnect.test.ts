import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogModel } from '../shared/models/catalog.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, type TestDeveloper, type TestPlatform, walletBalanceMicros } from './support/test-platform.js';
import { pollUntil } from './support/poll.js';

/**
 * A client that goes away mid-stream: the gateway aborts its upstream request (the emulator sees
 * its caller leave) and settles for what was generated, giving the rest of the reservation back.
 * The emulator paces this one stream (a slow_stream fault) so there is a middle to leave in.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper());
});
afterAll(() => emulated?.close());

const MODEL = 'svc:openai/gpt-4o-mini';
const PROMPT = 'Tell me a long story about gateways';

/** Polls until `read` gives a value (the gateway settles after the client left, asynchronously). */
const settledValue = async <T>(read: () => Promise<T | undefined>) => (await pollUntil(read, (value) => value !== undefined, { timeoutMs: 10_000, everyMs: 50 })) as T;

const walletMicros = () => walletBalanceMicros(gateway.platform, developer.accountId);

describe('a client that disconnects mid-stream', () => {
  it('aborts the upstream request and is billed for what was generated, the rest of the hold released', async () => {
    const whole = await call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: { model: MODEL, messages: [{ role: 'user', content: PROMPT }] }, headers: bearer(developer.key) });
    const fullText: string = whole.body.choices[0].message.content;
    const fullTokens: number = whole.body.usage.completion_tokens;
    expect(fullTokens).toBeGreaterThanOrEqual(12);

    await emulated.fault({ provider: 'openai', model: 'gpt-4o-mini', fault: { kind: 'slow_stream', chunkIntervalMs: 150 }, times: 1 });
    const before = await walletMicros();
    const controller = new AbortController();
    const response = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(developer.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], stream: true, stream_options: { include_usage: true } }),
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    const requestId = response.headers.get('x-request-id')!;

    // Read three content deltas, then leave.
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let received = '';
    let deltas = 0;
    while (deltas < 3) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before the client could leave');
      buffer += decoder.decode(value, { stream: true });
      const events = buffer.split('\n\n');
      buffer = events.pop()!;
      for (const event of events) {
        const content = JSON.parse(event.slice('data: '.length)).choices[0]?.delta?.content;
        if (content) {
          received += content;
          deltas += 1;
        }
      }
    }
    controller.abort();
    await reader.cancel().catch(() => undefined);

    // The emulator saw its caller (the gateway) go away before the end of the answer.
    const abandoned = await settledValue(async () => {
      const { data } = (await (await fetch(`${emulated.emulatorUrl}/_emulator/abandoned_streams`)).json()) as { data: Array<{ provider: string; model: string; chunksSent: number }> };
      return data.find((entry) => entry.provider === 'openai' && entry.model === 'gpt-4o-mini');
    });
    expect(abandoned.chunksSent).toBeGreaterThanOrEqual(3);
    expect(abandoned.chunksSent).toBeLessThan(fullTokens);

    // Billed for what was generated: the delivered text at least, less than the whole answer.
    const usage = await settledValue(async () => {
      const { rows } = await gateway.platform.db.query('SELECT model, tokens_in, tokens_out, cost_micros::int, hold_id FROM usage_records WHERE request_id = $1', [requestId]);
      return rows[0] as { model: string; tokens_in: number; tokens_out: number; cost_micros: number; hold_id: string } | undefined;
    });
    expect(usage.model).toBe(MODEL);
    expect(fullText.startsWith(received)).toBe(true);
    expect(usage.tokens_out).toBeGreaterThanOrEqual(Math.ceil(received.length / 4));
    expect(usage.tokens_out).toBeLessThan(Math.ceil(fullText.length / 4));
    // Not the provider's count of the whole answer, which a stream read to its end would have reported.
    expect(usage.tokens_out).toBeLessThan(fullTokens);
    const model = catalogModel(MODEL)!;
    expect(usage.cost_micros).toBe(Math.ceil((usage.tokens_in * model.inputMicrosPer1M) / 1e6) + Math.ceil((usage.tokens_out * model.outputMicrosPer1M) / 1e6));

    // The ledger took that cost and no more: the hold was settled and its remainder released.
    expect(before - (await walletMicros())).toBe(usage.cost_micros);
    const { rows: holds } = await gateway.platform.db.query('SELECT status, amount_micros::int FROM billing_holds WHERE id = $1', [usage.hold_id]);
    expect(holds[0].status).toBe('settled');
    expect(holds[0].amount_micros).toBeGreaterThan(usage.cost_micros);
    const { rows: open } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM billing_holds WHERE developer_id = $1 AND status = 'held'`, [developer.accountId]);
    expect(open[0].n).toBe(0);

    // It did not finish, so no chat.completion.finished is recorded for it.
    const { rows: finished } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM outbox_events WHERE developer_id = $1 AND type = 'chat.completion.finished' AND data->>'request_id' = $2`, [developer.accountId, requestId]);
    expect(finished[0].n).toBe(0);
  });
});
