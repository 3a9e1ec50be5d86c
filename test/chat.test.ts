import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { catalogModel } from '../shared/models/catalog.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, type TestDeveloper, type TestPlatform, walletBalanceMicros } from './support/test-platform.js';

/** The gateway's chat completions with the emulator as every provider, driven by the official openai SDK. */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper({ XAI_API_KEY: '' }));
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(() => emulated?.close());
afterEach(() => emulated.clearFaults());

const fault = (rule: unknown) => emulated.fault(rule);
const chat = (json: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json, headers: { ...bearer(developer.key), ...headers } });
const hello = [{ role: 'user', content: 'Hello, gateway' }];
const base64Of = (bytes: number) => 'A'.repeat(Math.ceil((bytes * 4) / 3));
const img = (bytes = 10) => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${base64Of(bytes)}` } });
const pdf = (bytes: number) => ({ type: 'file', file: { file_data: `data:application/pdf;base64,${base64Of(bytes)}` } });

const walletMicros = () => walletBalanceMicros(gateway.platform, developer.accountId);

describe('through the official openai SDK', () => {
  it('completes a chat, metered at the catalog price of the tokens used', async () => {
    const before = await walletMicros();
    const { data, response } = await client.chat.completions.create({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello, gateway' }] }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.id).toMatch(/^chatcmpl-/);
    expect(data.model).toBe('svc:openai/gpt-4o-mini');
    expect(data.choices[0]!.message.content).toMatch(/\w+/);
    const usage = data.usage!;
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    const model = catalogModel('svc:openai/gpt-4o-mini')!;
    const expected = Math.ceil((usage.prompt_tokens * model.inputMicrosPer1M) / 1e6) + Math.ceil((usage.completion_tokens * model.outputMicrosPer1M) / 1e6);
    expect(before - (await walletMicros())).toBe(expected);
    expect(Number(response.headers.get('x-svc-wallet-deducted'))).toBeCloseTo(expected / 1e6, 9);
    const { rows } = await gateway.platform.db.query('SELECT model, tokens_in, tokens_out FROM usage_records WHERE developer_id = $1 ORDER BY id DESC LIMIT 1', [developer.accountId]);
    expect(rows[0]).toEqual({ model: 'svc:openai/gpt-4o-mini', tokens_in: usage.prompt_tokens, tokens_out: usage.completion_tokens });
  });

  it('streams to the end with usage, the same words as without streaming, billed the same', async () => {
    const whole = await client.chat.completions.create({ model: 'svc:groq/llama-3.3-70b-versatile', messages: [{ role: 'user', content: 'Stream please' }] });
    const before = await walletMicros();
    const stream = await client.chat.completions.create({ model: 'svc:groq/llama-3.3-70b-versatile', messages: [{ role: 'user', content: 'Stream please' }], stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage;
    let finish;
    for await (const part of stream) {
      text += part.choices[0]?.delta?.content ?? '';
      finish ??= part.choices[0]?.finish_reason ?? undefined;
      if (part.usage) usage = part.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe('stop');
    expect(usage).toEqual(whole.usage);
    const model = catalogModel('svc:groq/llama-3.3-70b-versatile')!;
    expect(before - (await walletMicros())).toBe(Math.ceil((usage!.prompt_tokens * model.inputMicrosPer1M) / 1e6) + Math.ceil((usage!.completion_tokens * model.outputMicrosPer1M) / 1e6));
  });

  it('serves native and custom-transport providers in the same wire format', async () => {
    for (const model of ['match:anthropic/haiku', 'svc:gemini/gemini-2.0-flash', 'svc:cohere/command-r-plus', 'svc:anthropic/claude-sonnet-4-20250514@us-cloud1', 'svc:anthropic/claude-sonnet-4-20250514@eu-cloud2', 'svc:bedrock/amazon.nova-pro-v1:0', 'svc:vertex/gemini-2.0-flash', 'svc:azure/gpt-4o', 'svc:watsonx/ibm/granite-3-8b-instruct']) {
      const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 });
      expect({ model, ok: (completion.choices[0]!.message.content ?? '').length > 0 && completion.usage!.prompt_tokens > 0 }).toEqual({ model, ok: true });
    }
  });
});

describe('model references and headers', () => {
  it('resolves match: and says which model answered, and when a pinned family has a newer one', async () => {
    const floating = await chat({ model: 'match:anthropic/sonnet', messages: hello });
    expect(floating.status).toBe(200);
    expect(floating.headers.get('x-svc-model-resolved')).toMatch(/^svc:anthropic\/claude-sonnet/);
    const pinned = await chat({ model: 'match:anthropic/sonnet=4', messages: hello });
    expect(pinned.headers.get('x-svc-model-resolved')).toBe('svc:anthropic/claude-sonnet-4-20250514');
    expect(pinned.headers.get('x-svc-model-newer-available')).toBe(floating.headers.get('x-svc-model-resolved'));
    expect(pinned.body.model).toBe('svc:anthropic/claude-sonnet-4-20250514');
  });

  it('falls back along a cascade when the cheap entry fails, and says so', async () => {
    await fault({ provider: 'groq', fault: { kind: 'status', status: 503 }, times: 10 });
    const response = await chat({ model: ['svc:groq/llama-3.3-70b-versatile', 'svc:openai/gpt-4o-mini'], messages: hello });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-svc-model-used')).toBe('svc:openai/gpt-4o-mini');
    expect(response.headers.get('x-svc-models-tried')).toBe('svc:groq/llama-3.3-70b-versatile,svc:openai/gpt-4o-mini');
    expect(response.headers.get('x-svc-fallback-triggered')).toBe('true');
  });

  it('retries a retryable upstream failure before giving up on a model', async () => {
    await fault({ provider: 'openai', fault: { kind: 'status', status: 503 }, times: 1 });
    expect((await chat({ model: 'svc:openai/gpt-4o-mini', messages: hello })).status).toBe(200);
  });
});

describe('errors, before any model is called or billed', () => {
  it.each([
    [{ model: 'gpt-4o', messages: hello }, 400, 'invalid_model_ref', 'model'],
    [{ model: 'svc:openai/gpt-4o@mars', messages: hello }, 400, 'invalid_model_ref', 'model'],
    [{ messages: hello }, 400, 'missing_model', 'model'],
    [{ model: 'svc:openai/gpt-4o-mini' }, 400, 'missing_messages', 'messages'],
    [{ model: 'svc:openai/gpt-4o-mini', messages: [] }, 400, 'missing_messages', 'messages'],
    [{ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'x'.repeat(100_001) }] }, 400, 'messages_too_large', 'messages'],
    [{ model: 'svc:openai/text-embedding-3-small', messages: hello }, 400, 'invalid_model_for_chat', 'model'],
    [{ model: 'svc:openai/gpt-4o@eu', messages: hello }, 400, 'unsupported_provider', 'model'],
    [{ model: 'match:openai/sonnet', messages: hello }, 400, 'unsupported_provider', 'model'],
    [{ model: 'slot:fast', messages: hello }, 400, 'unknown_slot', 'model'],
    [{ model: 'user:sk-x/gpt-4o', messages: hello }, 400, 'byok_not_supported', 'model'],
    [{ model: ['svc:groq/llama-3.3-70b-versatile', 'svc:openai/gpt-4o-mini'], messages: hello, stream: true }, 400, 'fallback_with_stream_unsupported', 'model'],
    [{ model: 'svc:groq/llama-3.3-70b-versatile', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }, 400, 'content_parts_unsupported_by_model', 'messages.0.content'],
    [{ model: 'svc:xai/grok-3', messages: hello }, 503, 'platform_not_configured', undefined],
  ])('%j → %i %s', async (json, status, code, param) => {
    const before = await walletMicros();
    const response = await chat(json);
    expect({ status: response.status, code: response.body.error?.code, param: response.body.error?.param }).toEqual({ status, code, param });
    expect(await walletMicros()).toBe(before);
  });

  it.each([
    ['three images', [img(), img(), img()], 'content_part_limit_exceeded'],
    ['three PDFs', [pdf(10), pdf(10), pdf(10)], 'content_part_limit_exceeded'],
    ['an image over 20 MB', [img(20 * 1024 * 1024 + 3)], 'content_part_too_large'],
    ['a PDF over 20 MB', [pdf(20 * 1024 * 1024 + 3)], 'content_part_too_large'],
    ['audio over 25 MB', [{ type: 'input_audio', input_audio: { data: 'A'.repeat(Math.ceil(((25 * 1024 * 1024 + 3) * 4) / 3)), format: 'wav' } }], 'content_part_too_large'],
    ['a non-PDF document', [{ type: 'file', file: { file_data: 'data:text/plain;base64,aGk=' } }], 'invalid_content_part'],
    ['a file reference', [{ type: 'image_url', image_url: { url: 'svc_file:file_abc' } }], 'invalid_content_part'],
    ['an unknown part', [{ type: 'video', video: {} }], 'invalid_content_part'],
  ])('400 for %s, checked before capabilities', async (_label, content, code) => {
    // gpt-4o takes images and PDFs but not audio: the limits must answer first either way.
    const response = await chat({ model: 'svc:openai/gpt-4o', messages: [{ role: 'user', content }] });
    expect({ status: response.status, code: response.body.error?.code, param: response.body.error?.param }).toEqual({ status: 400, code, param: 'messages.0.content' });
  });

  it('lets two images and two PDFs through to a model that takes them', async () => {
    const response = await chat({ model: 'svc:openai/gpt-4o', messages: [{ role: 'user', content: [img(), img(), pdf(10), pdf(10), { type: 'text', text: 'describe' }] }] });
    expect(response.status).toBe(200);
  });

  it('400 streaming_with_schema_fallback_unsupported for a cascade streaming a json_schema response', async () => {
    const before = await walletMicros();
    const format = { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { type: 'string' } } } } };
    const response = await chat({ model: ['svc:groq/llama-3.3-70b-versatile', 'svc:openai/gpt-4o-mini'], messages: hello, stream: true, response_format: format });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'streaming_with_schema_fallback_unsupported', param: 'model' });
    expect(await walletMicros()).toBe(before);
  });

  it('400 invalid_json for a body that is not JSON, 400 malformed_json for JSON that is not an object', async () => {
    const raw = (body: string) =>
      call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', body, headers: { ...bearer(developer.key), 'content-type': 'application/json' } });
    const broken = await raw('{"model": "svc:openai/gpt-4o-mini", "messages": [');
    expect({ status: broken.status, type: broken.body.error.type, code: broken.body.error.code }).toEqual({ status: 400, type: 'invalid_request_error', code: 'invalid_json' });
    const array = await raw(JSON.stringify([{ model: 'svc:openai/gpt-4o-mini', messages: hello }]));
    expect({ status: array.status, type: array.body.error.type, code: array.body.error.code }).toEqual({ status: 400, type: 'invalid_request_error', code: 'malformed_json' });
  });

  it('400 fallback_with_idempotency_unsupported for a cascade with an idempotency-key', async () => {
    const response = await chat({ model: ['svc:groq/llama-3.3-70b-versatile', 'svc:openai/gpt-4o-mini'], messages: hello }, { 'idempotency-key': 'k1' });
    expect(response.body.error.code).toBe('fallback_with_idempotency_unsupported');
  });

  it('503 upstream_unavailable when the provider keeps failing, and nothing is charged', async () => {
    await fault({ provider: 'openai', fault: { kind: 'status', status: 500 }, times: 10 });
    const before = await walletMicros();
    const response = await chat({ model: 'svc:openai/gpt-4o-mini', messages: hello });
    expect({ status: response.status, type: response.body.error.type, code: response.body.error.code }).toEqual({ status: 503, type: 'api_error', code: 'upstream_unavailable' });
    expect(await walletMicros()).toBe(before);
  });
});

describe('streams that break', () => {
  it('ends with an error event, not a silent truncation, and bills what was generated', async () => {
    await fault({ provider: 'openai', fault: { kind: 'disconnect', afterChunks: 3 }, times: 1 });
    const before = await walletMicros();
    const response = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(developer.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'a stream that breaks' }], stream: true }),
    });
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(text).not.toContain('[DONE]');
    const last = text.trim().split('\n\n').at(-1)!;
    expect(JSON.parse(last.slice('data: '.length)).error.code).toBe('upstream_unavailable');
    const charged = before - (await walletMicros());
    expect(charged).toBeGreaterThan(0);
    const { rows } = await gateway.platform.db.query('SELECT tokens_out FROM usage_records WHERE developer_id = $1 ORDER BY id DESC LIMIT 1', [developer.accountId]);
    expect(rows[0].tokens_out).toBeGreaterThan(0);
  });
});

describe('idempotency-key', () => {
  const usageRows = async (requestKey: string) => {
    const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM usage_records WHERE developer_id = $1 AND created_at > now() - interval '1 minute' AND model = $2`, [developer.accountId, requestKey]);
    return rows[0].n as number;
  };

  it('replays the original result within the window, charging once', async () => {
    const json = { model: 'svc:deepseek/deepseek-chat', messages: [{ role: 'user', content: 'idempotent hello' }] };
    const before = await walletMicros();
    const first = await chat(json, { 'idempotency-key': 'order-1' });
    const afterFirst = await walletMicros();
    const second = await chat(json, { 'idempotency-key': 'order-1' });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('x-svc-wallet-deducted')).toBe(first.headers.get('x-svc-wallet-deducted'));
    expect(before - afterFirst).toBeGreaterThan(0);
    expect(await walletMicros()).toBe(afterFirst);
    expect(await usageRows('svc:deepseek/deepseek-chat')).toBe(1);
  });

  it('makes concurrent duplicates wait for the first and share its result', async () => {
    const json = { model: 'svc:cerebras/llama3.1-8b', messages: [{ role: 'user', content: 'concurrent hello' }] };
    const responses = await Promise.all(Array.from({ length: 5 }, () => chat(json, { 'idempotency-key': 'order-2' })));
    expect(new Set(responses.map((response) => response.body.id)).size).toBe(1);
    expect(responses.filter((response) => response.headers.get('idempotent-replayed') === 'true')).toHaveLength(4);
    expect(await usageRows('svc:cerebras/llama3.1-8b')).toBe(1);
  });

  it('409 idempotency_key_reuse for the same key with another body', async () => {
    await chat({ model: 'svc:openai/gpt-4o-mini', messages: hello }, { 'idempotency-key': 'order-3' });
    const reuse = await chat({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'something else' }] }, { 'idempotency-key': 'order-3' });
    expect({ status: reuse.status, type: reuse.body.error.type, code: reuse.body.error.code }).toEqual({ status: 409, type: 'conflict_error', code: 'idempotency_key_reuse' });
  });

  it('scopes keys by customer, and gives the key back when the call fails', async () => {
    const json = { model: 'svc:fireworks/accounts/fireworks/models/llama-v3p1-8b-instruct', messages: hello };
    const a = await chat(json, { 'idempotency-key': 'order-4', 'Svc-Customer': 'alice' });
    const b = await chat(json, { 'idempotency-key': 'order-4', 'Svc-Customer': 'bob' });
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.body.id).not.toBe(a.body.id);

    await fault({ provider: 'mistral', fault: { kind: 'status', status: 500 }, times: 10 });
    const failing = { model: 'svc:mistral/mistral-large-latest', messages: hello };
    expect((await chat(failing, { 'idempotency-key': 'order-5' })).status).toBe(503);
    await emulated.clearFaults();
    const retried = await chat(failing, { 'idempotency-key': 'order-5' });
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
  });

  it('400 for a stream with an idempotency-key', async () => {
    const response = await chat({ model: 'svc:openai/gpt-4o-mini', messages: hello, stream: true }, { 'idempotency-key': 'order-6' });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'idempotency-key' });
  });
});

describe('events', () => {
  it('records chat.completion.finished for each completion and request.failed_after_retry when retries run out', async () => {
    const events = async (type: string) => {
      const { rows } = await gateway.platform.db.query('SELECT data FROM outbox_events WHERE developer_id = $1 AND type = $2 ORDER BY created_at', [developer.accountId, type]);
      return rows.map((row) => row.data);
    };
    const finishedBefore = (await events('chat.completion.finished')).length;
    const done = await chat({ model: 'svc:openai/gpt-4o', messages: [{ role: 'user', content: 'event please' }] });
    const finished = await events('chat.completion.finished');
    expect(finished).toHaveLength(finishedBefore + 1);
    expect(finished.at(-1)).toMatchObject({ completion_id: done.body.id, model: 'svc:openai/gpt-4o', usage: { prompt_tokens: done.body.usage.prompt_tokens } });

    await fault({ provider: 'together', fault: { kind: 'status', status: 502 }, times: 10 });
    const failed = await chat({ model: 'svc:together/meta-llama/Llama-3.3-70B-Instruct-Turbo', messages: hello });
    expect(failed.status).toBe(503);
    expect((await events('request.failed_after_retry')).at(-1)).toMatchObject({ request_id: failed.headers.get('x-request-id'), models_tried: ['svc:together/meta-llama/Llama-3.3-70B-Instruct-Turbo'] });
  });
});

describe('response_format json_schema', () => {
  const schema = { type: 'object', properties: { city: { type: 'string' }, population: { type: 'number' } }, required: ['city', 'population'], additionalProperties: false };
  const format = { type: 'json_schema', json_schema: { name: 'city', schema } };

  it('returns output that matches the schema', async () => {
    const response = await chat({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'A city, please' }], response_format: format });
    expect(response.status).toBe(200);
    const parsed = JSON.parse(response.body.choices[0].message.content);
    expect(typeof parsed.city).toBe('string');
    expect(typeof parsed.population).toBe('number');
  });

  it('re-prompts output that breaks the schema, then gives up with 422, billing the attempts made', async () => {
    const countUsage = async () => {
      const { rows } = await gateway.platform.db.query(`SELECT count(*)::int AS n FROM usage_records WHERE developer_id = $1 AND model = 'svc:openai/gpt-4.1'`, [developer.accountId]);
      return rows[0].n as number;
    };
    const before = await countUsage();
    const response = await chat({ model: 'svc:openai/gpt-4.1', messages: [{ role: 'user', content: 'EMULATOR_BREAK_SCHEMA a city' }], response_format: format });
    expect({ status: response.status, type: response.body.error.type, code: response.body.error.code }).toEqual({ status: 422, type: 'invalid_request_error', code: 'response_schema_validation_failed' });
    expect((await countUsage()) - before).toBe(3);
  });

  it('400 for a schema that does not compile, before any call is billed', async () => {
    const before = await walletMicros();
    const response = await chat({ model: 'svc:openai/gpt-4o-mini', messages: hello, response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'no-such-type' } } } });
    expect({ status: response.status, code: response.body.error.code, param: response.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'response_format.json_schema.schema' });
    expect(await walletMicros()).toBe(before);
  });
});
