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

describe('POST /v1/audio/transcriptions', () => {
  // The emulator reads audio as 16 kHz 16-bit mono: 32,000 bytes a second.
  const audio = (seconds: number) => Buffer.alloc(seconds * 32_000, 7);
  const form = (fields: Record<string, string>, file?: Buffer, filename = 'clip.wav') => {
    const data = new FormData();
    for (const [name, value] of Object.entries(fields)) data.set(name, value);
    if (file) data.set('file', new Blob([file], { type: 'audio/wav' }), filename);
    return fetch(`${emulated.gateway.baseUrl}/v1/audio/transcriptions`, { method: 'POST', headers: bearer(developer.key), body: data });
  };

  it('transcribes through the openai SDK, billed by the real duration', async () => {
    const { toFile } = await import('openai');
    const before = await walletMicros();
    const result = await client.audio.transcriptions.create({ model: 'svc:openai/whisper-1', file: await toFile(audio(90), 'clip.wav') });
    expect(result.text).toMatch(/\w+/);
    // 90 seconds at 0.006 USD a minute.
    expect(before - (await walletMicros())).toBe(Math.ceil((90 * 6_000) / 60));
  });

  it('renders every response format from the detailed transcript', async () => {
    const verbose = (await (await form({ model: 'svc:groq/whisper-large-v3', response_format: 'verbose_json' }, audio(3))).json()) as { text: string };
    expect(verbose).toMatchObject({ task: 'transcribe', duration: 3, text: expect.any(String) });
    const srt = await (await form({ model: 'svc:groq/whisper-large-v3', response_format: 'srt' }, audio(3))).text();
    expect(srt).toBe(`1\n00:00:00,000 --> 00:00:03,000\n${verbose.text}\n`);
    const vtt = await form({ model: 'svc:groq/whisper-large-v3', response_format: 'vtt' }, audio(3));
    expect(vtt.headers.get('content-type')).toContain('text/vtt');
    expect(await vtt.text()).toBe(`WEBVTT\n\n00:00:00.000 --> 00:00:03.000\n${verbose.text}\n`);
    expect(await (await form({ model: 'svc:groq/whisper-large-v3', response_format: 'text' }, audio(3))).text()).toBe(verbose.text);
  });

  it('refuses what is malformed before calling anyone', async () => {
    const before = await walletMicros();
    const json = await call(emulated.gateway.baseUrl, '/v1/audio/transcriptions', { method: 'POST', json: { model: 'svc:openai/whisper-1' }, headers: bearer(developer.key) });
    expect({ status: json.status, code: json.body.error.code }).toEqual({ status: 400, code: 'invalid_multipart' });
    const noFile = await form({ model: 'svc:openai/whisper-1' });
    expect(((await noFile.json()) as any).error.code).toBe('missing_file');
    const noModel = await form({}, audio(1));
    expect(((await noModel.json()) as any).error.code).toBe('missing_model');
    const wrongKind = await form({ model: 'svc:openai/tts-1' }, audio(1));
    expect(((await wrongKind.json()) as any).error.param).toBe('model');
    const tooBig = await form({ model: 'svc:openai/whisper-1' }, Buffer.alloc(25 * 1024 * 1024 + 1));
    expect({ status: tooBig.status, code: ((await tooBig.json()) as any).error.code }).toEqual({ status: 413, code: 'request_too_large' });
    expect(await walletMicros()).toBe(before);
  });
});
