import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulatedGateway, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper } from './support/test-platform.js';

let emulated: EmulatedGateway;
let developer: TestDeveloper;
let client: OpenAI;

beforeAll(async () => {
  emulated = await startEmulatedGateway();
  developer = await createDeveloper(emulated.gateway.platform, { creditMicros: 5_000_000, scopes: ['api:chat'] });
  client = new OpenAI({ baseURL: `${emulated.gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(() => emulated?.close());

async function walletMicros(): Promise<number> {
  const { rows } = await emulated.gateway.platform.db.query('SELECT balance_micros FROM wallets WHERE account_id = $1', [developer.accountId]);
  return Number(rows[0].balance_micros);
}

describe('POST /v1/images/generations', () => {
  it.each([
    ['svc:openai/gpt-image-1', 40_000],
    ['svc:together/black-forest-labs/FLUX.1-schnell', 3_000],
    ['svc:xai/grok-2-image', 70_000],
  ])('generates with %s through the openai SDK, billed per image', async (model, perImage) => {
    const before = await walletMicros();
    const result = await client.images.generate({ model, prompt: 'a lighthouse at dusk', n: 2 });
    expect(result.data).toHaveLength(2);
    expect(Buffer.from(result.data![0]!.b64_json!, 'base64').subarray(1, 4).toString()).toBe('PNG');
    expect(before - (await walletMicros())).toBe(2 * perImage);
  });

  it.each([
    [{ model: 'svc:openai/gpt-image-1' }, 'invalid_request', 'prompt'],
    [{ model: 'svc:openai/gpt-image-1', prompt: 'x', n: 5 }, 'invalid_request', 'n'],
    [{ model: 'svc:openai/gpt-image-1', prompt: 'x', response_format: 'url' }, 'invalid_request', 'response_format'],
    [{ model: 'svc:openai/gpt-4o', prompt: 'x' }, 'invalid_request', 'model'],
    [{ prompt: 'x' }, 'missing_model', 'model'],
    [{ model: 'dall-e-3', prompt: 'x' }, 'invalid_model_ref', 'model'],
  ])('%j → 400 %s', async (json, code, param) => {
    const response = await call(emulated.gateway.baseUrl, '/v1/images/generations', { method: 'POST', json, headers: bearer(developer.key) });
    expect({ status: response.status, code: response.body.error?.code, param: response.body.error?.param }).toEqual({ status: 400, code, param });
  });
});

describe('POST /v1/audio/speech', () => {
  it('speaks through the openai SDK, billed per character', async () => {
    const before = await walletMicros();
    const response = await client.audio.speech.create({ model: 'svc:openai/tts-1', input: 'Hello from the gateway', voice: 'alloy' });
    expect(response.headers.get('content-type')).toBe('audio/mpeg');
    expect((await response.arrayBuffer()).byteLength).toBeGreaterThan(0);
    expect(before - (await walletMicros())).toBe(Math.ceil(('Hello from the gateway'.length * 15_000_000) / 1_000_000));
  });

  it('honours the format, and refuses what is not a text-to-speech model', async () => {
    const wav = await fetch(`${emulated.gateway.baseUrl}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...bearer(developer.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc:groq/playai-tts', input: 'hi', voice: 'Fritz-PlayAI', response_format: 'wav' }),
    });
    expect(wav.headers.get('content-type')).toBe('audio/wav');
    const wrong = await call(emulated.gateway.baseUrl, '/v1/audio/speech', { method: 'POST', json: { model: 'svc:openai/whisper-1', input: 'hi', voice: 'alloy' }, headers: bearer(developer.key) });
    expect({ status: wrong.status, param: wrong.body.error.param }).toEqual({ status: 400, param: 'model' });
  });
});

describe('media references sent to chat', () => {
  it('400 invalid_model_for_chat', async () => {
    const response = await call(emulated.gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: { model: 'svc:openai/gpt-image-1', messages: [{ role: 'user', content: 'hi' }] }, headers: bearer(developer.key) });
    expect(response.body.error.code).toBe('invalid_model_for_chat');
  });
});
